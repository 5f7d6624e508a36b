//! Identical kernels share their boots (issue 35, item 2). Two commits whose builds have one
//! identity ([`crate::kernel_id`]: the same vmlinux and modules apart from the release string
//! that carries the commit's id) are one kernel: a regression measured on the kernel cannot
//! tell them apart, so what one's boots say is said of both. A commit that changes only a
//! comment or a line the compiler drops in a file the kernel builds is such a commit: pruning
//! ([`super::prune`]) cannot leave it out before building, the build's identity finds it after.
//!
//! In the bisection, a built commit whose kernel is an endpoint's, or that of a commit with a
//! verdict, takes that verdict without a boot; two commits under test at once with one kernel
//! (a pool) are judged on their boots pooled. The posterior phase keeps each commit's own
//! boots (counting one boot at two places of the history would weigh it twice).

use super::{short, HuntState};
use crate::journal::{BootOutcome, BuildOutcome, Verdict};

/// The kernel identity of a built commit, when its build has one.
fn identity<'a>(state: &'a HuntState, commit: &str) -> Option<&'a str> {
    match state.builds.get(commit) {
        Some(BuildOutcome::Built {
            kernel_id: Some(id),
            ..
        }) => Some(id),
        _ => None,
    }
}

/// The other built commits whose kernel is `commit`'s, in id order (the journal's builds are
/// a map: the order must not depend on it).
pub fn others<'a>(state: &'a HuntState, commit: &str) -> Vec<&'a str> {
    let Some(id) = identity(state, commit) else {
        return Vec::new();
    };
    let mut same: Vec<&str> = state
        .builds
        .keys()
        .map(String::as_str)
        .filter(|c| *c != commit && identity(state, c) == Some(id))
        .collect();
    same.sort_unstable();
    same
}

/// Whether `commit` built the very kernel `other` built (both have an identity, and it is
/// one).
pub fn same(state: &HuntState, commit: &str, other: &str) -> bool {
    identity(state, commit).is_some_and(|id| identity(state, other) == Some(id))
}

/// What became of the boots of `commit`, a kernel another commit built: "not booted", or
/// "its N boot(s) not needed" when some were booted before its twin was known.
pub fn not_booted(state: &HuntState, commit: &str) -> String {
    match state.boots.get(commit).map_or(0, Vec::len) {
        0 => "not booted".to_owned(),
        own => format!("its {own} boot(s) not needed"),
    }
}

/// The verdict `commit` takes from a commit with its kernel: an endpoint's (`goods`, `bad`)
/// or one already given, the first in `others`' order; `None` when none has one.
pub fn verdict(
    state: &HuntState,
    commit: &str,
    goods: &[String],
    bad: &str,
) -> Option<(Verdict, String)> {
    let not_booted = not_booted(state, commit);
    others(state, commit).into_iter().find_map(|o| {
        let (verdict, whose) = if o == bad {
            (Verdict::Bad, format!("the bad endpoint {}", short(o)))
        } else if goods.iter().any(|g| g == o) {
            (Verdict::Good, format!("the good endpoint {}", short(o)))
        } else {
            let (_, v, _) = state.verdicts.iter().find(|(c, _, _)| c == o)?;
            (*v, format!("{} ({})", short(o), v.as_str()))
        };
        Some((
            verdict,
            format!(
                "the same kernel as {whose}: its build differs only in the release string; \
                 {not_booted}"
            ),
        ))
    })
}

/// The measured values (with their boot times, as [`HuntState::timed`]) and failed boots of
/// `commit` and of every commit with its kernel that has no verdict yet: one kernel's boots,
/// wherever they were started.
pub fn pooled(state: &HuntState, commit: &str) -> (Vec<(f64, f64)>, Vec<String>) {
    let mut values = Vec::new();
    let mut failures = Vec::new();
    let mut boots: Vec<&super::BootRecord> = std::iter::once(commit)
        .chain(
            others(state, commit)
                .into_iter()
                .filter(|o| !state.has_verdict(o)),
        )
        .flat_map(|c| state.boots.get(c).into_iter().flatten())
        .collect();
    // In the order they finished, as one commit's boots are.
    boots.sort_by_key(|r| r.seq);
    for r in boots {
        match &r.outcome {
            BootOutcome::Measured { value, .. } => values.push((*value, r.seq as f64)),
            BootOutcome::Failed { reason, .. } => failures.push(reason.clone()),
        }
    }
    (values, failures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Event;
    use std::path::PathBuf;

    fn built(state: &mut HuntState, commit: &str, id: Option<&str>) {
        state.apply(&Event::BuildFinished {
            commit: commit.into(),
            outcome: BuildOutcome::Built {
                kernel_release: format!("6.1.0-fb{commit}"),
                image: PathBuf::from("/k"),
                log: PathBuf::from("/l"),
                seconds: 1.0,
                kernel_id: id.map(str::to_owned),
            },
        });
    }

    #[test]
    fn a_kernel_takes_the_verdict_of_its_twin_and_only_of_its_twin() {
        let mut s = HuntState::default();
        built(&mut s, "good", Some("k0"));
        built(&mut s, "bad", Some("k2"));
        built(&mut s, "a", Some("k0"));
        built(&mut s, "b", Some("k1"));
        built(&mut s, "c", Some("k1"));
        built(&mut s, "d", None);
        built(&mut s, "e", None);
        let goods = ["good".to_owned()];
        let (v, why) = verdict(&s, "a", &goods, "bad").expect("a is good's kernel");
        assert_eq!(v, Verdict::Good);
        assert!(
            why.contains("the good endpoint good") && why.contains("not booted"),
            "{why}"
        );
        assert_eq!(
            verdict(&s, "b", &goods, "bad"),
            None,
            "c has no verdict yet"
        );
        s.apply(&Event::Verdict {
            commit: "c".into(),
            verdict: Verdict::Bad,
            reason: "like bad".into(),
        });
        assert_eq!(
            verdict(&s, "b", &goods, "bad").map(|v| v.0),
            Some(Verdict::Bad)
        );
        // No identity, no twin: two prebuilt kernels are never one.
        assert!(others(&s, "d").is_empty());
        assert_eq!(verdict(&s, "d", &goods, "bad"), None);
    }

    #[test]
    fn twins_under_test_at_once_are_judged_on_their_boots_together() {
        let mut s = HuntState::default();
        built(&mut s, "a", Some("k1"));
        built(&mut s, "b", Some("k1"));
        built(&mut s, "c", Some("k2"));
        for (commit, value) in [("a", 1.0), ("b", 2.0), ("c", 9.0), ("a", 3.0)] {
            s.record_boot(commit, value);
        }
        let values = |b: Vec<(f64, f64)>| b.into_iter().map(|b| b.0).collect::<Vec<f64>>();
        assert_eq!(values(pooled(&s, "a").0), vec![1.0, 2.0, 3.0]);
        assert_eq!(values(pooled(&s, "b").0), vec![1.0, 2.0, 3.0]);
        assert_eq!(values(pooled(&s, "c").0), vec![9.0]);
    }
}
