//! The candidate DAG in a compact form: ids interned in one buffer, parents in flat arrays.
//!
//! A kernel range holds over a million commits (issue 24); one `String` and one `Vec` per
//! commit, plus a hash map from id to index, cost ~300 bytes a commit before any search state.
//! Here a commit costs its id's bytes, two offsets, its parents' indices, its time and one
//! entry of a sorted index: ~70 bytes for a 40-hex id. [`Dag::nodes`] still hands out
//! [`Node`]s for callers written against the first layout, built once on first use.

use std::sync::{Arc, OnceLock};

/// One commit of the candidate DAG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Full object id in lowercase hex; git breaks some ties by comparing these.
    pub id: String,
    /// Indices into the node list of this commit's parents that are themselves candidates, in
    /// the commit's parent order (first parent first). Parents outside the set are left out.
    pub parents: Vec<usize>,
    /// Committer timestamp in seconds since the epoch; git's walk order depends on it.
    pub commit_time: i64,
}

/// How a commit compares with one of its parents at the bisection's paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathLink {
    /// The parent's node index, or `None` when the parent is outside the range (an ancestor
    /// of a good commit).
    pub parent: Option<usize>,
    /// The parent is outside the range but is one of the good commits given at the start
    /// (git's BOTTOM): it still counts as a relevant parent.
    pub bottom: bool,
    /// The commit changes none of the paths relative to this parent.
    pub same: bool,
}

/// A commit's comparison with its parents at the bisection's paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathInfo {
    /// One link per parent considered, in parent order (only the first in first-parent mode);
    /// the in-range ones are exactly [`Node::parents`], in the same order.
    pub links: Vec<PathLink>,
    /// For a root commit: none of the paths exists in its tree.
    pub root_treesame: bool,
}

/// Why a list of nodes is not a valid candidate DAG.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    /// No node at all: a range always holds at least the bad commit.
    #[error("the candidate DAG is empty: it must hold at least the bad commit")]
    Empty,
    /// The same object id is listed twice.
    #[error("commit {id} is listed twice in the candidate DAG")]
    DuplicateId {
        /// The repeated id.
        id: String,
    },
    /// A parent index does not point past the commit, or past the end of the list.
    #[error(
        "commit {id} (node {node}) names parent index {parent}: parents must come after \
         their children and inside the list of {len} nodes"
    )]
    BadParent {
        /// The commit naming the parent.
        id: String,
        /// Its index.
        node: usize,
        /// The offending parent index.
        parent: usize,
        /// Number of nodes.
        len: usize,
    },
    /// A node cannot be reached from node 0, so node 0 is not the bad commit of this set.
    #[error("commit {id} is not an ancestor of the bad commit {bad}: not a candidate set")]
    NotReachable {
        /// The unreachable commit.
        id: String,
        /// Node 0, taken as the bad commit.
        bad: String,
    },
    /// The path comparisons given do not match the nodes and their parents.
    #[error("path comparison of node {node} does not match its parents")]
    PathInfoMismatch {
        /// The first node that does not match (or the number of nodes, for a length error).
        node: usize,
    },
    /// More commits, parent links or id bytes than 32-bit offsets can hold (4 billion).
    #[error("the candidate DAG is too large: {what} exceed 2^32")]
    TooLarge {
        /// What overflowed.
        what: &'static str,
    },
}

/// The candidate commits of a bisection: everything reachable from bad and from no good.
///
/// **Order requirement:** nodes are listed children before parents (every parent index is
/// greater than the index of the commit naming it), which is what a topological revision walk
/// from the bad commit (`git rev-list --topo-order bad ^good...`, libgit2's
/// `Sort::TOPOLOGICAL`) produces; the bad commit is therefore node 0. The order git's bisection
/// itself uses is re-derived from commit times at every step (see the module documentation).
///
/// Cloning is cheap: the arrays are shared.
#[derive(Clone)]
pub struct Dag {
    data: Arc<DagData>,
}

struct DagData {
    /// Every id, one after the other; id `i` is `ids[id_end[i - 1]..id_end[i]]`.
    ids: String,
    id_end: Vec<u32>,
    /// Parents of node `i` are `parents[parent_end[i - 1]..parent_end[i]]` (CSR).
    parents: Vec<u32>,
    parent_end: Vec<u32>,
    times: Vec<i64>,
    /// Node indices sorted by id, for [`Dag::index_of`].
    by_id: Vec<u32>,
    paths: Option<Vec<PathInfo>>,
    /// [`Dag::nodes`], made on first use.
    nodes: OnceLock<Vec<Node>>,
}

impl std::fmt::Debug for Dag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dag")
            .field("len", &self.len())
            .field("bad", &self.id(0))
            .field("paths", &self.data.paths.is_some())
            .finish()
    }
}

/// Builds a [`Dag`] one commit at a time, children first, without a [`Node`] per commit.
#[derive(Debug, Default)]
pub struct DagBuilder {
    ids: String,
    id_end: Vec<u32>,
    parents: Vec<u32>,
    parent_end: Vec<u32>,
    times: Vec<i64>,
    overflow: Option<&'static str>,
}

fn offset(n: usize, what: &'static str, overflow: &mut Option<&'static str>) -> u32 {
    u32::try_from(n).unwrap_or_else(|_| {
        overflow.get_or_insert(what);
        0
    })
}

impl DagBuilder {
    /// An empty builder with room for `nodes` commits and `edges` parent links.
    pub fn with_capacity(nodes: usize, edges: usize) -> DagBuilder {
        DagBuilder {
            ids: String::with_capacity(nodes * 40),
            id_end: Vec::with_capacity(nodes),
            parents: Vec::with_capacity(edges),
            parent_end: Vec::with_capacity(nodes),
            times: Vec::with_capacity(nodes),
            overflow: None,
        }
    }

    /// Adds the next commit: its id, the node indices of its in-range parents (in parent
    /// order) and its committer time.
    pub fn push(&mut self, id: &str, parents: impl IntoIterator<Item = usize>, commit_time: i64) {
        self.ids.push_str(id);
        let end = offset(self.ids.len(), "id bytes", &mut self.overflow);
        self.id_end.push(end);
        for p in parents {
            let p = offset(p, "nodes", &mut self.overflow);
            self.parents.push(p);
        }
        let end = offset(self.parents.len(), "parent links", &mut self.overflow);
        self.parent_end.push(end);
        self.times.push(commit_time);
    }

    /// Number of commits pushed so far.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Whether nothing was pushed yet.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// Checks the commits pushed (parents after children, ids unique, everything reachable
    /// from node 0) and indexes them.
    pub fn build(self) -> Result<Dag, DagError> {
        let len = self.times.len();
        if len == 0 {
            return Err(DagError::Empty);
        }
        if let Some(what) = self.overflow {
            return Err(DagError::TooLarge { what });
        }
        if u32::try_from(len).is_err() {
            return Err(DagError::TooLarge { what: "nodes" });
        }
        let mut data = DagData {
            ids: self.ids,
            id_end: self.id_end,
            parents: self.parents,
            parent_end: self.parent_end,
            times: self.times,
            by_id: Vec::new(),
            paths: None,
            nodes: OnceLock::new(),
        };
        for i in 0..len {
            let bad = |&&p: &&u32| p as usize <= i || p as usize >= len;
            if let Some(&parent) = data.parents_of(i).iter().find(bad) {
                return Err(DagError::BadParent {
                    id: data.id(i).to_string(),
                    node: i,
                    parent: parent as usize,
                    len,
                });
            }
        }
        let by_id = sorted_by_id(&data);
        let dup = by_id
            .windows(2)
            .filter(|w| data.id(w[0] as usize) == data.id(w[1] as usize))
            .map(|w| w[0].max(w[1]))
            .min();
        if let Some(i) = dup {
            return Err(DagError::DuplicateId {
                id: data.id(i as usize).to_string(),
            });
        }
        data.by_id = by_id;
        // Children come first, so one forward pass marks everything node 0 reaches.
        let mut reached = vec![false; len];
        reached[0] = true;
        for i in 0..len {
            if !reached[i] {
                return Err(DagError::NotReachable {
                    id: data.id(i).to_string(),
                    bad: data.id(0).to_string(),
                });
            }
            for &p in data.parents_of(i) {
                reached[p as usize] = true;
            }
        }
        Ok(Dag {
            data: Arc::new(data),
        })
    }
}

/// Node indices sorted by id. Sorting (8-byte prefix, index) pairs in one flat array, then
/// the rare runs of equal prefixes by the whole id, takes a quarter of the time of sorting
/// indices by string at a million ids, each comparison chasing two ids (issue 24).
fn sorted_by_id(data: &DagData) -> Vec<u32> {
    let len = data.times.len();
    let prefix = |i: usize| {
        let mut key = [0u8; 8];
        let id = data.id(i).as_bytes();
        let n = id.len().min(8);
        key[..n].copy_from_slice(&id[..n]);
        // Zero padding sorts a shorter id first, as string order does; equal keys are
        // ordered by the whole id below.
        u64::from_be_bytes(key)
    };
    let mut keyed: Vec<(u64, u32)> = (0..len).map(|i| (prefix(i), i as u32)).collect();
    keyed.sort_unstable();
    let mut by_id: Vec<u32> = keyed.iter().map(|&(_, i)| i).collect();
    let mut start = 0;
    for k in 1..=len {
        if k == len || keyed[k].0 != keyed[start].0 {
            if k - start > 1 {
                by_id[start..k]
                    .sort_unstable_by(|&a, &b| data.id(a as usize).cmp(data.id(b as usize)));
            }
            start = k;
        }
    }
    by_id
}

impl DagData {
    fn id(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.id_end[i - 1] };
        &self.ids[start as usize..self.id_end[i] as usize]
    }

    fn parents_of(&self, i: usize) -> &[u32] {
        let start = if i == 0 { 0 } else { self.parent_end[i - 1] };
        &self.parents[start as usize..self.parent_end[i] as usize]
    }
}

impl Dag {
    /// Checks and indexes a candidate DAG listed children before parents, bad commit first.
    pub fn new(nodes: Vec<Node>) -> Result<Dag, DagError> {
        let edges = nodes.iter().map(|n| n.parents.len()).sum();
        let mut b = DagBuilder::with_capacity(nodes.len(), edges);
        for n in &nodes {
            b.push(&n.id, n.parents.iter().copied(), n.commit_time);
        }
        b.build()
    }

    /// Limits the bisection to commits that change some paths (`git bisect start -- <paths>`):
    /// one [`PathInfo`] per node, its in-range links matching [`Node::parents`].
    pub fn with_paths(self, info: Vec<PathInfo>) -> Result<Dag, DagError> {
        if info.len() != self.len() {
            return Err(DagError::PathInfoMismatch { node: info.len() });
        }
        for (i, pi) in info.iter().enumerate() {
            let inside = pi.links.iter().filter_map(|l| l.parent);
            if !inside.eq(self.parents_of(i)) {
                return Err(DagError::PathInfoMismatch { node: i });
            }
        }
        let mut data = Arc::try_unwrap(self.data).unwrap_or_else(|shared| DagData {
            ids: shared.ids.clone(),
            id_end: shared.id_end.clone(),
            parents: shared.parents.clone(),
            parent_end: shared.parent_end.clone(),
            times: shared.times.clone(),
            by_id: shared.by_id.clone(),
            paths: None,
            nodes: OnceLock::new(),
        });
        data.paths = Some(info);
        Ok(Dag {
            data: Arc::new(data),
        })
    }

    /// Number of commits in the DAG.
    pub fn len(&self) -> usize {
        self.data.times.len()
    }

    /// Always false: a valid DAG holds at least the bad commit.
    pub fn is_empty(&self) -> bool {
        self.data.times.is_empty()
    }

    /// The full id of node `i`.
    pub fn id(&self, i: usize) -> &str {
        self.data.id(i)
    }

    /// Node indices of the in-range parents of node `i`, in parent order.
    pub fn parents_of(&self, i: usize) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.data.parents_of(i).iter().map(|&p| p as usize)
    }

    /// The same as [`Dag::parents_of`], as stored.
    pub(super) fn parent_slice(&self, i: usize) -> &[u32] {
        self.data.parents_of(i)
    }

    /// Committer time of node `i`, seconds since the epoch.
    pub fn commit_time(&self, i: usize) -> i64 {
        self.data.times[i]
    }

    /// The nodes, in the order given to [`Dag::new`].
    ///
    /// Made on the first call (~170 bytes a commit) for callers that want [`Node`]s;
    /// [`Dag::id`], [`Dag::parents_of`] and [`Dag::commit_time`] read the compact form.
    pub fn nodes(&self) -> &[Node] {
        self.data.nodes.get_or_init(|| {
            (0..self.len())
                .map(|i| Node {
                    id: self.id(i).to_string(),
                    parents: self.parents_of(i).collect(),
                    commit_time: self.commit_time(i),
                })
                .collect()
        })
    }

    /// The path comparisons given with [`Dag::with_paths`], one per node.
    pub(super) fn paths(&self) -> Option<&[PathInfo]> {
        self.data.paths.as_deref()
    }

    /// Index of the commit with this full id, if it is in the DAG.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        let by_id = &self.data.by_id;
        by_id
            .binary_search_by(|&i| self.id(i as usize).cmp(id))
            .ok()
            .map(|k| by_id[k] as usize)
    }

    /// Marks every ancestor (self included) of the given nodes.
    pub(super) fn ancestors(&self, starts: &[usize]) -> Vec<bool> {
        let mut seen = vec![false; self.len()];
        for &s in starts {
            seen[s] = true;
        }
        // Children come first: one forward pass from the first start spreads the marks.
        let Some(&from) = starts.iter().min() else {
            return seen;
        };
        for i in from..self.len() {
            if seen[i] {
                for &p in self.parent_slice(i) {
                    seen[p as usize] = true;
                }
            }
        }
        seen
    }
}
