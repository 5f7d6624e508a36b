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
//!
//! # At the scale of Linux (issue 24)
//!
//! A kernel range holds over a million commits. The DAG is kept compact ([`dag`]: ids in one
//! buffer, parents in flat arrays); each step renumbers the candidates and walks them once
//! ([`count`]), counts merges 64 at a time in machine words on every core instead of one walk
//! each, and fills the rest in by git's own propagation; the choice among the weights, with
//! or without skips, is in [`choose`] and [`skip`], git's path simplification in
//! [`simplify`]. Only the arithmetic changed: every choice is git's.

mod choose;
mod count;
mod dag;
mod simplify;
mod skip;
#[cfg(test)]
mod tests;

pub use dag::{Dag, DagBuilder, DagError, Node, PathInfo, PathLink};
pub use skip::estimate_bisect_steps;

use simplify::Csr;

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
    /// Each node's parents after git's history simplification for the current goods; `None`
    /// without paths, where they are the DAG's own.
    simple: Option<Csr>,
    /// Nodes that change none of the paths (always false without paths).
    treesame: Vec<bool>,
    /// Each node's children (only with paths, for the simplification).
    children: Option<Csr>,
    bad: usize,
    good_marks: Vec<usize>,
    goods: Vec<String>,
    skipped: Vec<bool>,
    any_skip: bool,
    alive: Vec<bool>,
    alive_count: usize,
}

impl Bisection {
    /// Starts a bisection over `dag`, whose node 0 is `bad`; `goods` are the good commits that
    /// bound the range (outside the DAG; kept for reports).
    pub fn new<S: AsRef<str>>(dag: &Dag, bad: &str, goods: &[S]) -> Result<Bisection, StartError> {
        let first = dag.id(0);
        if first != bad {
            return Err(StartError::BadNotFirst {
                bad: bad.to_string(),
                first: first.to_string(),
            });
        }
        let len = dag.len();
        let mut b = Bisection {
            bad: 0,
            good_marks: Vec::new(),
            goods: goods.iter().map(|g| g.as_ref().to_string()).collect(),
            simple: None,
            treesame: vec![false; len],
            children: None,
            skipped: vec![false; len],
            any_skip: false,
            alive: vec![true; len],
            alive_count: len,
            dag: dag.clone(),
        };
        if b.dag.paths().is_some() {
            b.children = Some(Csr::children(&b.dag));
            b.recompute(0, Vec::new(), bad, Verdict::Bad)
                .expect("the bad commit alone is never excluded");
        }
        Ok(b)
    }

    /// Node `i`'s parents as the walk follows them: simplified with paths, else the DAG's.
    fn parents(&self, i: usize) -> &[u32] {
        match &self.simple {
            Some(simple) => simple.row(i),
            None => self.dag.parent_slice(i),
        }
    }

    /// The current bad commit (the newest commit known to be bad).
    pub fn bad(&self) -> &str {
        self.dag.id(self.bad)
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
        if self.simple.is_none() {
            return self.alive_count;
        }
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
        (0..self.dag.len())
            .filter(|&i| self.alive[i])
            .map(|i| self.dag.id(i))
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
        // Without paths the simplification never changes; with paths it depends on the goods,
        // so a bad verdict (same goods) keeps it.
        let resimplify =
            self.children.is_some() && (self.simple.is_none() || goods != self.good_marks);
        let simplified = resimplify.then(|| {
            let mut bottom = vec![false; excluded.len()];
            for &g in &goods {
                bottom[g] = true;
            }
            let children = self
                .children
                .as_ref()
                .expect("children are kept with paths");
            simplify::simplify(&self.dag, children, &excluded, &bottom)
        });
        let parents = |i: usize| match (&simplified, &self.simple) {
            (Some((simple, _)), _) | (None, Some(simple)) => simple.row(i),
            (None, None) => self.dag.parent_slice(i),
        };
        // What bad reaches through the simplified parents without entering a good's ancestry:
        // children come first, so one forward pass from bad spreads it.
        let mut alive = vec![false; excluded.len()];
        let mut alive_count = 0;
        if !excluded[bad] {
            alive[bad] = true;
            for i in bad..alive.len() {
                if alive[i] {
                    alive_count += 1;
                    for &p in parents(i) {
                        let p = p as usize;
                        alive[p] |= !excluded[p];
                    }
                }
            }
        }
        if !alive[bad] {
            return Err(MarkError::BothGoodAndBad {
                id: id.to_string(),
                verdict,
                bad: self.dag.id(bad).to_string(),
            });
        }
        self.alive_count = alive_count;
        self.alive = alive;
        if let Some((simple, treesame)) = simplified {
            self.simple = Some(simple);
            self.treesame = treesame;
        }
        self.bad = bad;
        self.good_marks = goods;
        Ok(())
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

    /// This step's candidates, renumbered, with git's list over them.
    fn step(&self) -> count::Step {
        count::Step::new(
            &self.alive,
            self.alive_count,
            &self.treesame,
            |i| self.dag.commit_time(i),
            |i| self.parents(i),
        )
    }
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
