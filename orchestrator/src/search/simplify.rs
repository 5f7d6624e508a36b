//! git's history simplification for path-limited bisection (`git bisect start -- <paths>`).
//!
//! Which parents of a merge are "relevant" depends on the good commits, so this is redone
//! after every good verdict, as git's fresh walk does (see the module documentation of
//! [`crate::search`] for what is and is not modelled).

use super::dag::Dag;

/// Lists of node indices in flat arrays: row `i` is `items[end[i - 1]..end[i]]`.
#[derive(Debug, Clone, Default)]
pub(super) struct Csr {
    end: Vec<u32>,
    items: Vec<u32>,
}

impl Csr {
    /// Row `i`.
    pub(super) fn row(&self, i: usize) -> &[u32] {
        let start = if i == 0 { 0 } else { self.end[i - 1] };
        &self.items[start as usize..self.end[i] as usize]
    }

    /// Appends a row.
    pub(super) fn push(&mut self, row: impl IntoIterator<Item = u32>) {
        self.items.extend(row);
        let end = u32::try_from(self.items.len()).expect("fewer links than the DAG's, checked");
        self.end.push(end);
    }

    /// Each node's children in the DAG, children in increasing index order.
    pub(super) fn children(dag: &Dag) -> Csr {
        let n = dag.len();
        let mut count = vec![0u32; n];
        for i in 0..n {
            for &p in dag.parent_slice(i) {
                count[p as usize] += 1;
            }
        }
        let mut end = Vec::with_capacity(n);
        let mut total = 0u32;
        for c in &count {
            total += c;
            end.push(total);
        }
        let mut fill: Vec<u32> = end.iter().zip(&count).map(|(e, c)| e - c).collect();
        let mut items = vec![0u32; total as usize];
        for i in 0..n {
            for &p in dag.parent_slice(i) {
                items[fill[p as usize] as usize] = i as u32;
                fill[p as usize] += 1;
            }
        }
        Csr { end, items }
    }
}

/// Whether git's walk has already marked `p` (an ancestor of a good commit) UNINTERESTING
/// when it simplifies its child `child`: `p` is a parent of a good commit (marked at the
/// start), or a child of `p` on a good's side was popped first, i.e. is newer than `child`.
/// (git's marking spreads with its date-ordered walk, so a parent that is an ancestor of a
/// good can still count as relevant; recursive marking of already-parsed commits and
/// equal dates are not modelled.)
fn marked_before(
    dag: &Dag,
    children: &Csr,
    p: usize,
    child: usize,
    excluded: &[bool],
    bottom: &[bool],
) -> bool {
    let time = dag.commit_time(child);
    children.row(p).iter().any(|&d| {
        let d = d as usize;
        bottom[d] || (excluded[d] && dag.commit_time(d) > time)
    })
}

/// git's `try_to_simplify_commit` for every node, given which nodes are ancestors of a good
/// commit (`excluded`) and which are good commits (`bottom`): each node's parents after the
/// simplification, and whether it is TREESAME (changes none of the paths).
pub(super) fn simplify(
    dag: &Dag,
    children: &Csr,
    excluded: &[bool],
    bottom: &[bool],
) -> (Csr, Vec<bool>) {
    let info = dag
        .paths()
        .expect("simplification is only asked for with paths");
    let mut simple = Csr::default();
    let mut treesame = Vec::with_capacity(dag.len());
    for (node, pi) in info.iter().enumerate() {
        if pi.links.is_empty() {
            simple.push([]);
            treesame.push(pi.root_treesame);
            continue;
        }
        let (mut relevant_parents, mut relevant_change, mut irrelevant_change) = (0, false, false);
        let mut follow = None;
        for link in &pi.links {
            let relevant = match link.parent {
                Some(p) => {
                    !excluded[p]
                        || bottom[p]
                        || !marked_before(dag, children, p, node, excluded, bottom)
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
                simple.push(parent.map(|p| p as u32));
                treesame.push(true);
            }
            None => {
                simple.push(dag.parent_slice(node).iter().copied());
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
