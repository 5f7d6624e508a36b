//! git bisect's choice of the next commit to test, as pure code.
//!
//! This module holds no I/O, no git2 types and no clock: it is handed the DAG of candidate
//! commits (everything reachable from the bad commit and from no good commit) and answers
//! "which commit next?" exactly as `git bisect` (git 2.47) would, so that a firstbad hunt and a
//! `git bisect log` of the same verdicts name the same commits in the same order.
//!
//! # How git chooses (bisect.c, revision.c)
//!
//! 1. **Walk order.** `git bisect next` walks `bad ^good...` afresh after every verdict. The walk
//!    (`limit_list`) pops commits from a priority queue ordered by committer date, newest first,
//!    ties broken first-in-first-out; a popped commit pushes its not-yet-seen parents in parent
//!    order. [`Bisection`] re-derives that order from [`Node::commit_time`] and the parent order
//!    at every step, because restricting the first walk's order to the new candidate set is not
//!    the same thing once the bad commit moves and two candidates share a timestamp (common
//!    after `git rebase` or `git am`, which stamp a whole series with the same second).
//! 2. **Weights.** `find_bisection` reverses that list (oldest first). A commit's weight is the
//!    number of candidates it reaches, itself included. Root commits weigh 1; merges are counted
//!    by a full walk (`count_distance`) in list order; single-parent commits take their parent's
//!    weight plus one, in repeated passes over the list.
//! 3. **Choice without skips.** The first commit found (merges first, then the passes) whose
//!    weight `w` satisfies `|2w - N| <= 1`, or `|2w - N| < N / 1024` ("approximately halfway",
//!    within ~0.1% for large ranges), is taken at once; failing that, the first commit in list
//!    order that maximises `min(w, N - w)`.
//! 4. **Choice once anything was skipped.** As soon as one commit has ever been marked skip,
//!    git computes every weight, sorts all candidates by `min(w, N - w)` descending then object
//!    id ascending (`best_bisection_sorted`), and takes the first one unless it is skipped. If it
//!    is skipped, `skip_away` picks from the non-skipped ones at an index drawn from git's
//!    deterministic PRN (seeded by how many non-skipped candidates there are), stepping back one
//!    place if that index names the bad commit.
//! 5. **End.** When the choice is the bad commit itself, it is the first bad commit; if skipped
//!    candidates remain, the culprit is any of them or the bad commit.
//!
//! # Known differences from git
//!
//! - git ≥ 2.50 counts merges starting from the middle of the merge list outwards (a speed-up for
//!   huge ranges); on ranges with merges at the halfway point its first choice can differ from
//!   git 2.47's, which this module follows.
//! - With committer dates that go backwards (clock skew), git's walk may stop before it has
//!   marked every ancestor of a good commit and leave a few of them in the candidate set; this
//!   module always uses the exact set.
//! - With paths, git decides whether a parent is "relevant" (not yet known to be an ancestor of
//!   a good) while its date-ordered walk spreads the marks; this module models that spread
//!   (a parent counts as known when a child of it on a good's side is newer than the commit
//!   being simplified) but not git's re-marking of commits it had already parsed, nor equal
//!   dates. In `tests/range_vs_git.rs` the 90 fixed cases match git exactly; on further seeds
//!   (`RANGE_SEEDS=1000..=1300`) first-parent matched all 301, while the first path-limited
//!   mismatches came at the 57th (paths) and 206th (paths + first-parent) seed: one commit
//!   tested more or less than git, the same culprit found (`RANGE_ENDS_ONLY=1`).
//!
//! # Path-limited bisection
//!
//! `git bisect start -- <paths>` keeps in the walk commits that do not touch the paths (git
//! flags them TREESAME) but never counts, weighs as a step, or chooses them; its history
//! simplification (`try_to_simplify_commit`) also drops the other parents of a merge that is
//! TREESAME to a *relevant* parent, i.e. one that is not an ancestor of a good commit, or is a
//! good commit itself. Which parents are relevant changes with every good verdict, so the
//! simplification is redone after each one, as git's fresh walk does. The loader
//! ([`crate::history`]) gives each commit's per-parent comparison with [`Dag::with_paths`].
//! When only TREESAME
//! commits are left besides a TREESAME bad commit, git stops with "No testable commit found";
//! [`Bisection::next`] answers [`Next::OnlySkippedLeft`] with those commits, since the culprit
//! is one of them (outside the paths).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

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

/// The candidate commits of a bisection: everything reachable from bad and from no good.
///
/// **Order requirement:** nodes are listed children before parents (every parent index is
/// greater than the index of the commit naming it), which is what a topological revision walk
/// from the bad commit (`git rev-list --topo-order bad ^good...`, libgit2's
/// `Sort::TOPOLOGICAL`) produces; the bad commit is therefore node 0. The order git's bisection
/// itself uses is re-derived from commit times at every step (see the module documentation).
#[derive(Debug, Clone)]
pub struct Dag {
    nodes: Vec<Node>,
    index: HashMap<String, usize>,
    paths: Option<Vec<PathInfo>>,
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
}

impl Dag {
    /// Checks and indexes a candidate DAG listed children before parents, bad commit first.
    pub fn new(nodes: Vec<Node>) -> Result<Dag, DagError> {
        if nodes.is_empty() {
            return Err(DagError::Empty);
        }
        let len = nodes.len();
        let mut index = HashMap::with_capacity(len);
        for (i, node) in nodes.iter().enumerate() {
            if index.insert(node.id.clone(), i).is_some() {
                return Err(DagError::DuplicateId {
                    id: node.id.clone(),
                });
            }
            if let Some(&parent) = node.parents.iter().find(|&&p| p <= i || p >= len) {
                return Err(DagError::BadParent {
                    id: node.id.clone(),
                    node: i,
                    parent,
                    len,
                });
            }
        }
        // Children come first, so one forward pass marks everything node 0 reaches.
        let mut reached = vec![false; len];
        reached[0] = true;
        for i in 0..len {
            if !reached[i] {
                return Err(DagError::NotReachable {
                    id: nodes[i].id.clone(),
                    bad: nodes[0].id.clone(),
                });
            }
            for &p in &nodes[i].parents {
                reached[p] = true;
            }
        }
        Ok(Dag {
            nodes,
            index,
            paths: None,
        })
    }

    /// Limits the bisection to commits that change some paths (`git bisect start -- <paths>`):
    /// one [`PathInfo`] per node, its in-range links matching [`Node::parents`].
    pub fn with_paths(mut self, info: Vec<PathInfo>) -> Result<Dag, DagError> {
        if info.len() != self.nodes.len() {
            return Err(DagError::PathInfoMismatch { node: info.len() });
        }
        for (i, (node, pi)) in self.nodes.iter().zip(&info).enumerate() {
            let inside: Vec<usize> = pi.links.iter().filter_map(|l| l.parent).collect();
            if inside != node.parents {
                return Err(DagError::PathInfoMismatch { node: i });
            }
        }
        self.paths = Some(info);
        Ok(self)
    }

    /// Number of commits in the DAG.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a valid DAG holds at least the bad commit.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The nodes, in the order given to [`Dag::new`].
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Index of the commit with this full id, if it is in the DAG.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Marks every ancestor (self included) of the given nodes.
    fn ancestors(&self, starts: &[usize]) -> Vec<bool> {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack: Vec<usize> = Vec::new();
        for &s in starts {
            if !seen[s] {
                seen[s] = true;
                stack.push(s);
            }
        }
        while let Some(i) = stack.pop() {
            for &p in &self.nodes[i].parents {
                if !seen[p] {
                    seen[p] = true;
                    stack.push(p);
                }
            }
        }
        seen
    }
}

/// The outcome of testing one commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The commit does not have the regression: it and its ancestors are cleared.
    Good,
    /// The commit has the regression: the culprit is it or one of its ancestors.
    Bad,
    /// The commit cannot be tested (build failure, boot failure...): avoid it.
    Skip,
}

/// What to do next in a bisection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Test this commit and [`Bisection::mark`] it.
    Test(String),
    /// This is the first bad commit.
    Found(String),
    /// Only skipped commits are left: the first bad commit is one of these (the skipped
    /// candidates, in git's order, then the current bad commit).
    OnlySkippedLeft(Vec<String>),
}

/// Why a verdict could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkError {
    /// The commit is not in the candidate range given at the start.
    #[error("commit {id} is not in the bisection range: only commits reachable from the first bad commit and from no good commit can be marked")]
    UnknownCommit {
        /// The id given.
        id: String,
    },
    /// The verdict would leave no candidate: the bad commit would be an ancestor of a good one.
    #[error("commit {bad} would be both good and bad: marking {id} {verdict:?} contradicts earlier verdicts")]
    BothGoodAndBad {
        /// The commit being marked.
        id: String,
        /// Its verdict.
        verdict: Verdict,
        /// The bad commit that would also be good.
        bad: String,
    },
}

/// Why a bisection could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The bad commit must be node 0 of the candidate DAG.
    #[error("the bad commit {bad} is not the first node of the candidate DAG (found {first})")]
    BadNotFirst {
        /// The bad id given.
        bad: String,
        /// The DAG's node 0.
        first: String,
    },
}

/// A bisection in progress: the candidates left and the verdicts so far.
#[derive(Debug, Clone)]
pub struct Bisection {
    dag: Dag,
    /// Each node's parents after git's history simplification for the current goods.
    simple: Vec<Vec<usize>>,
    /// Nodes that change none of the paths (always false without paths).
    treesame: Vec<bool>,
    /// Each node's children (filled only with paths, for the simplification).
    children: Vec<Vec<usize>>,
    bad: usize,
    good_marks: Vec<usize>,
    goods: Vec<String>,
    skipped: Vec<bool>,
    any_skip: bool,
    alive: Vec<bool>,
    alive_count: usize,
}

/// git's `PRN_MODULO`: the range of its pseudo-random numbers.
const PRN_MODULO: i32 = 32768;

/// git's `get_prn`: `man 3 rand`'s LCG, seeded with `count` (bisect.c).
fn get_prn(count: u32) -> i32 {
    let next = count.wrapping_mul(1_103_515_245).wrapping_add(12_345);
    // The result is below 32768, so the cast is lossless.
    ((next / 65_536) % PRN_MODULO as u32) as i32
}

/// git's `sqrti`: Newton's integer square root in single-precision floats, replicated with
/// `f32` so that rounding matches.
fn sqrti(val: i32) -> i32 {
    if val == 0 {
        return 0;
    }
    let v = val as f32;
    let mut x = v;
    loop {
        let y = (x + v / x) / 2.0;
        let d = if y > x { y - x } else { x - y };
        x = y;
        if d < 0.5 {
            break;
        }
    }
    x as i32
}

/// Index into the list of `count` non-skipped candidates that git's `skip_away` draws.
fn skip_away_index(count: usize) -> usize {
    // git does this in C `int`; wrapping keeps the same value up to ~65k candidates and the
    // same (implementation-defined) behaviour past that.
    let count = i32::try_from(count).unwrap_or(i32::MAX);
    let prn = get_prn(count as u32);
    let idx = (count.wrapping_mul(prn) / PRN_MODULO).wrapping_mul(sqrti(prn)) / sqrti(PRN_MODULO);
    usize::try_from(idx).unwrap_or(0)
}

/// git's `approx_halfway` (git ≥ 2.30): weight `w` splits `nr` candidates well enough to stop.
fn approx_halfway(w: i64, nr: i64) -> bool {
    let diff = 2 * w - nr;
    // Exactly half, or one off for odd counts ("2 and 3 are halfway of 5").
    if (-1..=1).contains(&diff) {
        return true;
    }
    // Within ~0.1% of half for large ranges: git's speed-up for kernel-sized ranges.
    diff.abs() < nr / 1024
}

/// git's `estimate_bisect_steps`: roughly how many more tests after the current one.
pub fn estimate_bisect_steps(all: usize) -> u32 {
    if all < 3 {
        return 0;
    }
    let n = usize::BITS - 1 - all.leading_zeros();
    let e = 1usize << n;
    let x = all - e;
    if e < 3 * x {
        n
    } else {
        n - 1
    }
}

impl Bisection {
    /// Starts a bisection over `dag`, whose node 0 is `bad`; `goods` are the good commits that
    /// bound the range (outside the DAG; kept for reports).
    pub fn new<S: AsRef<str>>(dag: &Dag, bad: &str, goods: &[S]) -> Result<Bisection, StartError> {
        let first = &dag.nodes[0].id;
        if first != bad {
            return Err(StartError::BadNotFirst {
                bad: bad.to_string(),
                first: first.clone(),
            });
        }
        let len = dag.len();
        let mut b = Bisection {
            bad: 0,
            good_marks: Vec::new(),
            goods: goods.iter().map(|g| g.as_ref().to_string()).collect(),
            simple: dag.nodes.iter().map(|n| n.parents.clone()).collect(),
            treesame: vec![false; len],
            children: Vec::new(),
            skipped: vec![false; len],
            any_skip: false,
            alive: vec![true; len],
            alive_count: len,
            dag: dag.clone(),
        };
        if b.dag.paths.is_some() {
            b.children = vec![Vec::new(); len];
            for (i, n) in b.dag.nodes.iter().enumerate() {
                for &p in &n.parents {
                    b.children[p].push(i);
                }
            }
            b.recompute(0, Vec::new(), bad, Verdict::Bad)
                .expect("the bad commit alone is never excluded");
        }
        Ok(b)
    }

    /// Whether git's walk has already marked `p` (an ancestor of a good commit) UNINTERESTING
    /// when it simplifies its child `child`: `p` is a parent of a good commit (marked at the
    /// start), or a child of `p` on a good's side was popped first, i.e. is newer than `child`.
    /// (git's marking spreads with its date-ordered walk, so a parent that is an ancestor of a
    /// good can still count as relevant; recursive marking of already-parsed commits and
    /// equal dates are not modelled.)
    fn marked_before(&self, p: usize, child: &Node, excluded: &[bool], bottom: &[bool]) -> bool {
        self.children[p].iter().any(|&d| {
            bottom[d] || (excluded[d] && self.dag.nodes[d].commit_time > child.commit_time)
        })
    }

    /// git's `try_to_simplify_commit` for every node, given which nodes are ancestors of a
    /// good commit (`excluded`) and which are good commits (`bottom`).
    fn simplify(&self, excluded: &[bool], bottom: &[bool]) -> (Vec<Vec<usize>>, Vec<bool>) {
        let nodes = &self.dag.nodes;
        let Some(info) = &self.dag.paths else {
            let simple = nodes.iter().map(|n| n.parents.clone()).collect();
            return (simple, vec![false; nodes.len()]);
        };
        let mut simple = Vec::with_capacity(nodes.len());
        let mut treesame = Vec::with_capacity(nodes.len());
        for (node, pi) in nodes.iter().zip(info) {
            if pi.links.is_empty() {
                simple.push(Vec::new());
                treesame.push(pi.root_treesame);
                continue;
            }
            let (mut relevant_parents, mut relevant_change, mut irrelevant_change) =
                (0, false, false);
            let mut follow = None;
            for link in &pi.links {
                let relevant = match link.parent {
                    Some(p) => {
                        !excluded[p] || bottom[p] || !self.marked_before(p, node, excluded, bottom)
                    }
                    None => link.bottom,
                };
                relevant_parents += usize::from(relevant);
                match (link.same, relevant) {
                    (true, true) => {
                        follow = Some(link.parent);
                        break;
                    }
                    (true, false) => {}
                    (false, true) => relevant_change = true,
                    (false, false) => irrelevant_change = true,
                }
            }
            match follow {
                // TREESAME to a relevant parent: that parent alone is followed.
                Some(parent) => {
                    simple.push(parent.into_iter().collect());
                    treesame.push(true);
                }
                None => {
                    simple.push(node.parents.clone());
                    treesame.push(if relevant_parents > 0 {
                        !relevant_change
                    } else {
                        !irrelevant_change
                    });
                }
            }
        }
        (simple, treesame)
    }

    /// The current bad commit (the newest commit known to be bad).
    pub fn bad(&self) -> &str {
        &self.dag.nodes[self.bad].id
    }

    /// The good commits: those that bounded the range at the start, then those marked good.
    pub fn goods(&self) -> &[String] {
        &self.goods
    }

    /// Number of candidates left that can be tested, the bad commit included unless it is
    /// TREESAME (git's `all`).
    pub fn remaining(&self) -> usize {
        self.testable()
    }

    /// Rough number of tests still needed after the next one, as git's "(roughly N steps)".
    pub fn steps_left(&self) -> u32 {
        estimate_bisect_steps(self.testable())
    }

    /// Alive candidates that are not TREESAME.
    fn testable(&self) -> usize {
        self.alive
            .iter()
            .zip(&self.treesame)
            .filter(|&(&a, &t)| a && !t)
            .count()
    }

    /// Whether `id` is still a possible culprit.
    pub fn is_candidate(&self, id: &str) -> bool {
        self.dag.index_of(id).is_some_and(|i| self.alive[i])
    }

    /// The candidates left, in the DAG's order (children before parents).
    pub fn candidates(&self) -> impl Iterator<Item = &str> + '_ {
        self.dag
            .nodes
            .iter()
            .zip(&self.alive)
            .filter(|(_, &a)| a)
            .map(|(n, _)| n.id.as_str())
    }

    /// Records a verdict as `git bisect good|bad|skip <id>` does.
    ///
    /// Good removes the commit and its ancestors; bad makes the commit the new bad one and
    /// keeps only its ancestors; skip keeps the commit but steers the choice away from it (and,
    /// as in git, switches the choice to the sorted, all-weights mode for the rest of the
    /// bisection). A verdict that would leave no candidate is refused and changes nothing.
    pub fn mark(&mut self, id: &str, verdict: impl Into<Verdict>) -> Result<(), MarkError> {
        let verdict = verdict.into();
        let i = self
            .dag
            .index_of(id)
            .ok_or_else(|| MarkError::UnknownCommit { id: id.to_string() })?;
        match verdict {
            Verdict::Skip => {
                self.skipped[i] = true;
                self.any_skip = true;
                Ok(())
            }
            Verdict::Good => {
                let mut goods = self.good_marks.clone();
                goods.push(i);
                self.recompute(self.bad, goods, id, verdict)?;
                self.goods.push(id.to_string());
                Ok(())
            }
            Verdict::Bad => self.recompute(i, self.good_marks.clone(), id, verdict),
        }
    }

    /// Sets the candidate set to ancestors(bad) minus ancestors(goods), unless that is empty.
    fn recompute(
        &mut self,
        bad: usize,
        goods: Vec<usize>,
        id: &str,
        verdict: Verdict,
    ) -> Result<(), MarkError> {
        let excluded = self.dag.ancestors(&goods);
        // Without paths the simplification never changes; with paths it depends on the goods.
        let simplified = self.dag.paths.is_some().then(|| {
            let mut bottom = vec![false; excluded.len()];
            for &g in &goods {
                bottom[g] = true;
            }
            self.simplify(&excluded, &bottom)
        });
        let simple = simplified.as_ref().map_or(&self.simple, |s| &s.0);
        // What bad reaches through the simplified parents without entering a good's ancestry.
        let mut alive = vec![false; excluded.len()];
        if !excluded[bad] {
            alive[bad] = true;
            let mut stack = vec![bad];
            while let Some(i) = stack.pop() {
                for &p in &simple[i] {
                    if !excluded[p] && !alive[p] {
                        alive[p] = true;
                        stack.push(p);
                    }
                }
            }
        }
        if !alive[bad] {
            return Err(MarkError::BothGoodAndBad {
                id: id.to_string(),
                verdict,
                bad: self.dag.nodes[bad].id.clone(),
            });
        }
        self.alive_count = alive.iter().filter(|&&a| a).count();
        self.alive = alive;
        if let Some((simple, treesame)) = simplified {
            self.simple = simple;
            self.treesame = treesame;
        }
        self.bad = bad;
        self.good_marks = goods;
        Ok(())
    }

    /// git's walk of `bad ^good...`: pop newest committer date first, ties first-in-first-out,
    /// each popped commit queueing its unseen candidate parents in parent order.
    fn walk_order(&self) -> Vec<usize> {
        let nodes = &self.dag.nodes;
        let mut seen = vec![false; nodes.len()];
        let mut queue = BinaryHeap::new();
        let mut ctr: u64 = 0;
        seen[self.bad] = true;
        queue.push((nodes[self.bad].commit_time, Reverse(ctr), self.bad));
        let mut order = Vec::with_capacity(self.alive_count);
        while let Some((_, _, i)) = queue.pop() {
            order.push(i);
            for &p in &self.simple[i] {
                if self.alive[p] && !seen[p] {
                    seen[p] = true;
                    ctr += 1;
                    queue.push((nodes[p].commit_time, Reverse(ctr), p));
                }
            }
        }
        order
    }

    /// git's `count_distance`: candidates reachable from `start`, itself included, TREESAME
    /// ones left out.
    fn count_distance(&self, start: usize, stamp: &mut [u32], generation: u32) -> i64 {
        let mut stack = vec![start];
        stamp[start] = generation;
        let mut n = 0;
        while let Some(i) = stack.pop() {
            n += i64::from(!self.treesame[i]);
            for &p in &self.simple[i] {
                if self.alive[p] && stamp[p] != generation {
                    stamp[p] = generation;
                    stack.push(p);
                }
            }
        }
        n
    }

    /// git's `do_find_bisection`: weights over `list` (oldest first). Returns the early-exit
    /// commit when `early_exit` is set and one is approximately halfway, else `None` with all
    /// weights filled in.
    fn weigh(&self, list: &[usize], weight: &mut [i64], early_exit: bool) -> Option<usize> {
        let nodes = &self.dag.nodes;
        let treesame = &self.treesame;
        let nr = list.iter().filter(|&&i| !treesame[i]).count() as i64;
        let halfway = |i: usize, w: i64| !treesame[i] && approx_halfway(w, nr);
        let mut counted = 0i64;
        let mut merges = Vec::new();
        for &i in list {
            let interesting = self.simple[i].iter().filter(|&&p| self.alive[p]).count();
            match interesting {
                // A TREESAME root reaches no counted commit: weight 0, not counted.
                0 if treesame[i] => weight[i] = 0,
                0 => {
                    weight[i] = 1;
                    counted += 1;
                }
                1 => weight[i] = -1,
                _ => {
                    weight[i] = -2;
                    merges.push(i);
                }
            }
        }
        let mut stamp = vec![0u32; nodes.len()];
        for (generation, &m) in (1u32..).zip(&merges) {
            weight[m] = self.count_distance(m, &mut stamp, generation);
            if early_exit && halfway(m, weight[m]) {
                return Some(m);
            }
            counted += 1;
        }
        while counted < nr {
            for &i in list {
                if weight[i] >= 0 {
                    continue;
                }
                let known = self.simple[i]
                    .iter()
                    .find(|&&p| self.alive[p] && weight[p] >= 0);
                let Some(&q) = known else { continue };
                if treesame[i] {
                    weight[i] = weight[q];
                } else {
                    weight[i] = weight[q] + 1;
                    counted += 1;
                }
                if early_exit && halfway(i, weight[i]) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Records a verdict that may arrive out of order (parallel testing): a bad verdict for a
    /// descendant of the current bad commit adds nothing and is dropped, instead of moving the
    /// bad commit back up as `git bisect bad` would; anything else is [`Bisection::mark`].
    pub fn mark_result(&mut self, id: &str, verdict: impl Into<Verdict>) -> Result<(), MarkError> {
        let verdict = verdict.into();
        if verdict == Verdict::Bad {
            if let Some(i) = self.dag.index_of(id) {
                if !self.alive[i] && self.dag.ancestors(&[i])[self.bad] {
                    return Ok(());
                }
            }
        }
        self.mark(id, verdict)
    }

    /// Up to `k` commits to test at once on `k` idle hosts, chosen so that their verdicts split
    /// the candidates into `k + 1` near-equal parts: the `j`-th is the untested commit whose
    /// count of ancestors in the set is closest to `j * N / (k + 1)`. With `k = 1` this is git's
    /// own choice ([`Bisection::next`]). Empty when [`Bisection::next`] is not a test. Apply
    /// the verdicts with [`Bisection::mark_result`] in any order as they arrive.
    pub fn next_parallel(&self, k: usize) -> Vec<String> {
        let first = match self.next() {
            Next::Test(id) => id,
            _ => return Vec::new(),
        };
        if k <= 1 {
            return vec![first];
        }
        let nodes = &self.dag.nodes;
        let mut list = self.walk_order();
        list.reverse();
        let mut weight = vec![0i64; nodes.len()];
        self.weigh(&list, &mut weight, false);
        let testable: Vec<usize> = list
            .iter()
            .copied()
            .filter(|&i| !self.treesame[i] && !self.skipped[i] && i != self.bad)
            .collect();
        let nr = list.iter().filter(|&&i| !self.treesame[i]).count() as i64;
        let mut chosen: Vec<usize> = Vec::with_capacity(k);
        for j in 1..=k as i64 {
            // Rounded j * nr / (k + 1): the weight that ends the j-th of k + 1 parts.
            let target = (2 * j * nr + k as i64 + 1) / (2 * (k as i64 + 1));
            let best = testable
                .iter()
                .copied()
                .filter(|c| !chosen.contains(c))
                .min_by_key(|&c| (weight[c] - target).abs());
            match best {
                Some(c) => chosen.push(c),
                None => break,
            }
        }
        chosen.sort_by_key(|&c| weight[c]);
        chosen.dedup();
        chosen.into_iter().map(|c| nodes[c].id.clone()).collect()
    }

    /// The next step, chosen exactly as `git bisect next` would choose it.
    pub fn next(&self) -> Next {
        let nodes = &self.dag.nodes;
        let treesame = &self.treesame;
        let mut list = self.walk_order();
        list.reverse();
        let nr = list.iter().filter(|&&i| !treesame[i]).count() as i64;
        if nr == 0 {
            // git: "No testable commit found. Maybe you started with bad path arguments?"
            // The culprit is one of these commits, none of which touches the paths.
            let mut left: Vec<String> = list.iter().map(|&i| nodes[i].id.clone()).collect();
            left.reverse();
            return Next::OnlySkippedLeft(left);
        }
        let mut weight = vec![0i64; nodes.len()];
        let distance = |w: i64| w.min(nr - w);

        if !self.any_skip {
            let chosen = self.weigh(&list, &mut weight, true).unwrap_or_else(|| {
                // best_bisection: the first commit in list order with the best split.
                let mut best = list[0];
                let mut best_distance = -1;
                for &i in list.iter().filter(|&&i| !treesame[i]) {
                    if distance(weight[i]) > best_distance {
                        best = i;
                        best_distance = distance(weight[i]);
                    }
                }
                best
            });
            return if chosen == self.bad {
                Next::Found(nodes[chosen].id.clone())
            } else {
                Next::Test(nodes[chosen].id.clone())
            };
        }

        // Something was skipped at some point: git's FIND_BISECTION_ALL path.
        self.weigh(&list, &mut weight, false);
        let mut sorted: Vec<usize> = list.into_iter().filter(|&i| !treesame[i]).collect();
        sorted.sort_by(
            |&a, &b| match distance(weight[b]).cmp(&distance(weight[a])) {
                Ordering::Equal => nodes[a].id.cmp(&nodes[b].id),
                other => other,
            },
        );
        let (chosen, tried) = if !self.skipped[sorted[0]] {
            (Some(sorted[0]), Vec::new())
        } else {
            let (tried, filtered): (Vec<usize>, Vec<usize>) =
                sorted.into_iter().partition(|&i| self.skipped[i]);
            let chosen = (!filtered.is_empty()).then(|| {
                let index = skip_away_index(filtered.len());
                match filtered.get(index) {
                    Some(&c) if c != self.bad => c,
                    Some(_) if index > 0 => filtered[index - 1],
                    _ => filtered[0],
                }
            });
            (chosen, tried)
        };
        let ids = |v: &[usize]| v.iter().map(|&i| nodes[i].id.clone()).collect::<Vec<_>>();
        match chosen {
            None => Next::OnlySkippedLeft(ids(&tried)),
            Some(c) if c == self.bad => {
                if tried.is_empty() {
                    Next::Found(nodes[c].id.clone())
                } else {
                    let mut range = ids(&tried);
                    range.push(nodes[c].id.clone());
                    Next::OnlySkippedLeft(range)
                }
            }
            Some(c) => Next::Test(nodes[c].id.clone()),
        }
    }
}

/// The journal records verdicts with its own type; both mean the same three things.
impl From<crate::journal::Verdict> for Verdict {
    fn from(v: crate::journal::Verdict) -> Verdict {
        match v {
            crate::journal::Verdict::Good => Verdict::Good,
            crate::journal::Verdict::Bad => Verdict::Bad,
            crate::journal::Verdict::Skip => Verdict::Skip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a DAG from `(id, time, parents)` listed children first.
    fn dag(spec: &[(&str, i64, &[&str])]) -> Dag {
        let pos: HashMap<&str, usize> = spec.iter().enumerate().map(|(i, s)| (s.0, i)).collect();
        let nodes = spec
            .iter()
            .map(|(id, t, ps)| Node {
                id: id.to_string(),
                parents: ps.iter().map(|p| pos[p]).collect(),
                commit_time: *t,
            })
            .collect();
        Dag::new(nodes).expect("test DAG is valid")
    }

    /// A linear history c{n} -> ... -> c1 with increasing times.
    fn linear(n: usize) -> Dag {
        let names: Vec<String> = (1..=n).rev().map(|i| format!("c{i:02}")).collect();
        let nodes = (0..n)
            .map(|k| Node {
                id: names[k].clone(),
                parents: if k + 1 < n { vec![k + 1] } else { vec![] },
                commit_time: (n - k) as i64 * 10,
            })
            .collect();
        Dag::new(nodes).expect("linear DAG is valid")
    }

    /// Runs a bisection to the end with "bad iff `culprit` is an ancestor-or-self", returning
    /// the commits tested and the outcome.
    fn run(mut b: Bisection, culprit: &str, skip: &[&str]) -> (Vec<String>, Next) {
        let dag = b.dag.clone();
        let c = dag.index_of(culprit).expect("culprit in DAG");
        let mut tested = Vec::new();
        loop {
            match b.next() {
                Next::Test(id) => {
                    let i = dag.index_of(&id).expect("tested id in DAG");
                    let v = if skip.contains(&id.as_str()) {
                        Verdict::Skip
                    } else if dag.ancestors(&[i])[c] {
                        Verdict::Bad
                    } else {
                        Verdict::Good
                    };
                    tested.push(id.clone());
                    b.mark(&id, v).expect("consistent verdict");
                }
                end => return (tested, end),
            }
        }
    }

    #[test]
    fn linear_history_halves_and_finds_every_culprit() {
        let b = Bisection::new(&linear(10), "c10", &["c00"]).expect("start");
        // Ten candidates: c05 reaches five of them, exactly half.
        assert_eq!(b.next(), Next::Test("c05".into()));
        assert_eq!(b.remaining(), 10);
        assert_eq!(b.steps_left(), 2);
        for k in 1..=10 {
            let culprit = format!("c{k:02}");
            let (tested, end) = run(b.clone(), &culprit, &[]);
            assert_eq!(end, Next::Found(culprit.clone()), "tested {tested:?}");
            assert!(
                tested.len() <= 4,
                "too many steps for {culprit}: {tested:?}"
            );
        }
    }

    #[test]
    fn linear_history_sequence_for_a_known_culprit() {
        let b = Bisection::new(&linear(10), "c10", &["c00"]).expect("start");
        let (tested, end) = run(b, "c03", &[]);
        // c05 is bad: {c01..c05}, and c02 (weight 2 of 5) is the first within one of half.
        // c02 is good: {c03..c05}; roots are never early exits, so c04 (2 of 3) is next.
        // c04 is bad: {c03, c04}; nothing is halfway, best split is c03.
        assert_eq!(tested, ["c05", "c02", "c04", "c03"]);
        assert_eq!(end, Next::Found("c03".into()));
    }

    #[test]
    fn one_merge_is_counted_with_its_whole_ancestry() {
        //      m (bad)
        //     / \
        //    a2  b2
        //    |   |
        //    a1  b1      (a1, b1 have out-of-range parents: good)
        let d = dag(&[
            ("m", 50, &["a2", "b2"]),
            ("b2", 40, &["b1"]),
            ("a2", 30, &["a1"]),
            ("b1", 20, &[]),
            ("a1", 10, &[]),
        ]);
        let b = Bisection::new(&d, "m", &["g"]).expect("start");
        // N = 5. Walk: m, b2, a2, b1, a1; list: a1 b1 a2 b2 m. Weights: a1=1 b1=1 a2=2 (|4-5|=1,
        // halfway) -> a2.
        assert_eq!(b.next(), Next::Test("a2".into()));
        for culprit in ["m", "a1", "a2", "b1", "b2"] {
            let (_, end) = run(b.clone(), culprit, &[]);
            assert_eq!(end, Next::Found(culprit.into()));
        }
    }

    #[test]
    fn equal_commit_times_fall_back_to_walk_order() {
        // Same DAG, every commit in the same second: the walk is breadth-first in parent order
        // (m, a2, b2, a1, b1), so the list is b1 a1 b2 a2 m and b2 is met first at weight 2.
        let d = dag(&[
            ("m", 7, &["a2", "b2"]),
            ("b2", 7, &["b1"]),
            ("a2", 7, &["a1"]),
            ("b1", 7, &[]),
            ("a1", 7, &[]),
        ]);
        let b = Bisection::new(&d, "m", &["g"]).expect("start");
        assert_eq!(b.next(), Next::Test("b2".into()));
    }

    #[test]
    fn criss_cross_merges_find_every_culprit() {
        //   top (bad) = merge(x, y)
        //   x = merge(a, b), y = merge(b, a)     criss-cross
        //   a -> base, b -> base
        let d = dag(&[
            ("top", 60, &["x", "y"]),
            ("y", 50, &["b", "a"]),
            ("x", 40, &["a", "b"]),
            ("b", 30, &["base"]),
            ("a", 20, &["base"]),
            ("base", 10, &[]),
        ]);
        let b = Bisection::new(&d, "top", &["g"]).expect("start");
        // N = 6: a and b weigh 2; x and y weigh 4, the merges are counted first: x (list order
        // base a b x y top) has |8-6| = 2, not halfway; y likewise. Then a=2 (|4-6|=2), b=2.
        // best: base 1, a 2, b 2, x min(4,2)=2, ... first with 2 is a.
        assert_eq!(b.next(), Next::Test("a".into()));
        for culprit in ["top", "x", "y", "a", "b", "base"] {
            let (tested, end) = run(b.clone(), culprit, &[]);
            assert_eq!(end, Next::Found(culprit.into()), "tested {tested:?}");
        }
    }

    #[test]
    fn good_removes_ancestors_and_bad_restricts_to_ancestors() {
        let mut b = Bisection::new(&linear(10), "c10", &["c00"]).expect("start");
        b.mark("c04", Verdict::Good).expect("good");
        assert_eq!(b.remaining(), 6);
        assert!(!b.is_candidate("c04") && !b.is_candidate("c01"));
        b.mark("c08", Verdict::Bad).expect("bad");
        assert_eq!(b.bad(), "c08");
        assert_eq!(
            b.candidates().collect::<Vec<_>>(),
            ["c08", "c07", "c06", "c05"]
        );
        assert_eq!(b.goods(), ["c00", "c04"]);
    }

    #[test]
    fn contradictions_and_unknown_commits_are_refused() {
        let mut b = Bisection::new(&linear(5), "c05", &["c00"]).expect("start");
        b.mark("c02", Verdict::Good).expect("good");
        let err = b
            .mark("c01", Verdict::Bad)
            .expect_err("c01 is already good");
        assert!(matches!(err, MarkError::BothGoodAndBad { .. }), "{err}");
        let err = b
            .mark("c05", Verdict::Good)
            .expect_err("c05 is the bad commit");
        assert!(matches!(err, MarkError::BothGoodAndBad { .. }), "{err}");
        assert_eq!(b.remaining(), 3, "a refused verdict changes nothing");
        let err = b.mark("deadbeef", Verdict::Good).expect_err("unknown");
        assert!(err.to_string().contains("deadbeef"), "{err}");
    }

    #[test]
    fn skipping_everything_but_bad_reports_the_whole_range() {
        let b = Bisection::new(&linear(4), "c04", &["c00"]).expect("start");
        let (tested, end) = run(b, "c02", &["c01", "c02", "c03"]);
        assert_eq!(
            tested.len(),
            3,
            "each skipped commit is tried once: {tested:?}"
        );
        let Next::OnlySkippedLeft(range) = end else {
            panic!("expected OnlySkippedLeft, got {end:?}");
        };
        let mut sorted = range.clone();
        sorted.sort();
        assert_eq!(sorted, ["c01", "c02", "c03", "c04"]);
        assert_eq!(
            range.last().map(String::as_str),
            Some("c04"),
            "bad comes last"
        );
    }

    #[test]
    fn a_skip_beside_the_culprit_still_finds_it_when_possible() {
        let b = Bisection::new(&linear(16), "c16", &["c00"]).expect("start");
        let (tested, end) = run(b, "c09", &["c05"]);
        assert_eq!(end, Next::Found("c09".into()), "tested {tested:?}");
    }

    #[test]
    fn prn_and_sqrti_match_git() {
        // get_prn(n) = ((n * 1103515245 + 12345) / 65536) % 32768 in 32-bit unsigned.
        assert_eq!(get_prn(0), 0);
        assert_eq!(get_prn(1), 16838);
        assert_eq!(get_prn(2), 908);
        assert_eq!(sqrti(PRN_MODULO), 181);
        assert_eq!(sqrti(16838), 129);
        assert_eq!(sqrti(1), 1);
        // count 1 always draws index 0; count 2: prn 908 -> (2*908/32768)=0.
        assert_eq!(skip_away_index(1), 0);
        assert_eq!(skip_away_index(2), 0);
    }

    #[test]
    fn step_estimates_match_git() {
        let table = [
            (1, 0),
            (2, 0),
            (3, 1),
            (4, 1),
            (5, 1),
            (6, 2),
            (10, 2),
            (11, 3),
        ];
        for (all, steps) in table {
            assert_eq!(estimate_bisect_steps(all), steps, "all = {all}");
        }
        assert_eq!(estimate_bisect_steps(50_000), 15);
    }

    #[test]
    fn parallel_choice_splits_into_near_equal_parts() {
        let b = Bisection::new(&linear(16), "c16", &["c00"]).expect("start");
        // Weights in a line are positions: 16 / 4 = 4, 8, 12.
        assert_eq!(b.next_parallel(3), ["c04", "c08", "c12"]);
        assert_eq!(
            b.next_parallel(1),
            [match b.next() {
                Next::Test(id) => id,
                other => panic!("{other:?}"),
            }]
        );
        // Every culprit of a 64-commit line is found in at most 3 rounds of 3 hosts
        // (4^3 = 64), against 6 one at a time.
        for k in 1..=64 {
            let culprit = format!("c{k:02}");
            let mut b = Bisection::new(&linear(64), "c64", &["c00"]).expect("start");
            let c = b.dag.index_of(&culprit).expect("culprit");
            let mut rounds = 0;
            let found = loop {
                match b.next() {
                    Next::Found(id) => break id,
                    Next::Test(_) => {}
                    other => panic!("{other:?}"),
                }
                rounds += 1;
                let picks = b.next_parallel(3);
                // Verdicts arrive newest first, the reverse of the order given.
                for id in picks.iter().rev() {
                    let i = b.dag.index_of(id).expect("pick");
                    let v = if b.dag.ancestors(&[i])[c] {
                        Verdict::Bad
                    } else {
                        Verdict::Good
                    };
                    let _ = b.mark(id, v);
                }
            };
            assert_eq!(found, culprit);
            assert!(rounds <= 3, "{culprit}: {rounds} rounds");
        }
    }

    #[test]
    fn invalid_dags_are_rejected() {
        let n = |id: &str, parents: Vec<usize>| Node {
            id: id.into(),
            parents,
            commit_time: 0,
        };
        assert_eq!(Dag::new(vec![]).unwrap_err(), DagError::Empty);
        assert!(matches!(
            Dag::new(vec![n("a", vec![0])]),
            Err(DagError::BadParent { .. })
        ));
        assert!(matches!(
            Dag::new(vec![n("a", vec![]), n("a", vec![])]),
            Err(DagError::DuplicateId { .. })
        ));
        assert!(matches!(
            Dag::new(vec![n("a", vec![]), n("b", vec![])]),
            Err(DagError::NotReachable { .. })
        ));
        let d = Dag::new(vec![n("a", vec![1]), n("b", vec![])]).expect("valid");
        assert!(matches!(
            Bisection::new(&d, "b", &[] as &[&str]),
            Err(StartError::BadNotFirst { .. })
        ));
    }
}
