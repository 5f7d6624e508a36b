use std::collections::HashMap;

use super::skip::{get_prn, skip_away_index, sqrti, PRN_MODULO};
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

/// git's `do_find_bisection` as git writes it, one `count_distance` walk per merge: the
/// reference the 64-merges-a-word counting must agree with weight for weight.
fn weigh_one_merge_at_a_time(step: &count::Step, early_exit: bool) -> (Option<usize>, Vec<i64>) {
    let n = step.node.len();
    let (treesame, nr) = (&step.treesame, step.nr);
    let halfway = |i: usize, w: i64| !treesame[i] && approx_halfway(w, nr);
    let mut weight = vec![0i64; n];
    let mut counted = 0;
    let mut merges = Vec::new();
    for &i in &step.list {
        let i = i as usize;
        match step.parents.row(i).len() {
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
    for &m in &merges {
        let mut seen = vec![false; n];
        let mut stack = vec![m];
        seen[m] = true;
        let mut w = 0;
        while let Some(i) = stack.pop() {
            w += i64::from(!treesame[i]);
            for &p in step.parents.row(i) {
                if !seen[p as usize] {
                    seen[p as usize] = true;
                    stack.push(p as usize);
                }
            }
        }
        weight[m] = w;
        if early_exit && halfway(m, w) {
            return (Some(m), weight);
        }
        counted += 1;
    }
    while counted < nr {
        for &i in &step.list {
            let i = i as usize;
            if weight[i] >= 0 {
                continue;
            }
            let Some(&q) = step
                .parents
                .row(i)
                .iter()
                .find(|&&p| weight[p as usize] >= 0)
            else {
                continue;
            };
            if treesame[i] {
                weight[i] = weight[q as usize];
            } else {
                weight[i] = weight[q as usize] + 1;
                counted += 1;
            }
            if early_exit && halfway(i, weight[i]) {
                return (Some(i), weight);
            }
        }
    }
    (None, weight)
}

/// A random DAG of `n` commits, children first: mostly single parents, `merge_pct` percent
/// merges of 2-3 parents at most `reach` nodes further down, times loosely decreasing with
/// repeats (as after `git rebase`).
fn random_dag(rng: &mut impl rand::Rng, n: usize, merge_pct: u32, reach: usize) -> Dag {
    let mut b = DagBuilder::with_capacity(n, n + n / 4);
    let mut named = vec![false; n];
    for i in 0..n {
        let left = n - 1 - i;
        let mut parents = Vec::new();
        if left > 0 {
            let k = if rng.gen_range(0..100) < merge_pct {
                rng.gen_range(2..=3)
            } else {
                1
            };
            for _ in 0..k {
                let p = i + rng.gen_range(1..=left.min(reach));
                if !parents.contains(&p) {
                    parents.push(p);
                }
            }
            // Node 0 must reach everything: the next node is named by now at the latest.
            if !named[i + 1] && !parents.contains(&(i + 1)) {
                parents.push(i + 1);
            }
        }
        for &p in &parents {
            named[p] = true;
        }
        let time = (n - i) as i64 / 3 + rng.gen_range(0..4);
        let id = format!("{:08x}{i:06}", rng.gen::<u32>());
        b.push(&id, parents, time);
    }
    b.build().expect("random DAG is valid")
}

/// Issue 24: counting 64 merges per machine word (and on several cores) gives git's weights
/// and git's early exit, over many batches, with goods, bads and skips marked.
#[test]
fn merges_counted_in_words_weigh_as_one_walk_each() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(24);
    let mut dags = 0;
    while dags < 12 {
        let n = rng.gen_range(300..1500);
        let (merge_pct, reach) = (rng.gen_range(5..40), rng.gen_range(2..60));
        let d = random_dag(&mut rng, n, merge_pct, reach);
        dags += 1;
        let mut b = Bisection::new(&d, d.id(0), &["g"]).expect("start");
        for round in 0..6 {
            let step = b.step();
            for early in [true, false] {
                assert_eq!(
                    step.weigh(early),
                    weigh_one_merge_at_a_time(&step, early),
                    "dag {dags} round {round} early {early}"
                );
            }
            let pick = match b.next() {
                Next::Test(id) => id,
                _ => break,
            };
            let verdict = match rng.gen_range(0..5) {
                0 => Verdict::Skip,
                1 | 2 => Verdict::Good,
                _ => Verdict::Bad,
            };
            b.mark(&pick, verdict)
                .expect("a tested commit is a candidate");
        }
    }
}
