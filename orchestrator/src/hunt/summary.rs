//! The figures a person reads in the journal: how the host moved, where the culprit sits
//! between good and bad, the medians host by host, why a host leaves the pool.

use super::{short, BootRecord, HuntState};
use crate::journal::BootOutcome;
use crate::posterior::{rest, HostMove, Level, StepLevels};
use crate::sequential::{self, Timeline};
use crate::stats::median;

/// How the posterior saw the host move, for a person: the trend per 100 boots and a step, in
/// σ of boot-to-boot noise, with boot numbers counted over the whole hunt from 0.
pub fn host_summary(host: &HostMove, line: &Timeline) -> String {
    let step = match host.step {
        Some((at, size)) => format!(
            "a step of {size:+.2}σ from about boot {:.0} on",
            at * sequential::TREND_UNIT + line.origin
        ),
        None => "no step".to_owned(),
    };
    format!(
        "host as the posterior saw it: trend {:+.2}σ per {} boots, {step}",
        host.trend,
        sequential::TREND_UNIT
    )
}

/// Where the culprit and its parent sit between good (0%) and bad (100%), with 99% intervals
/// ([`crate::posterior::level_between`]), and what to do when the step between them is not the whole regression
/// ([`rest`], `floor` the smallest part that counts): when the culprit is short of bad, more
/// of it came later (hunt again from the culprit); when the parent is worse than good, some
/// came earlier (hunt again up to the parent).
pub fn partial_summary(levels: &StepLevels, parent_id: &str, culprit_id: &str) -> String {
    let StepLevels {
        parent,
        culprit,
        floor,
        ..
    } = *levels;
    let pct = |l: &Level| {
        format!(
            "{:.0}% ({}% interval {:.0} to {:.0}%)",
            100.0 * l.level,
            crate::posterior::LEVEL_PERCENT,
            100.0 * l.lo,
            100.0 * l.hi
        )
    };
    let mut s = format!(
        "of the way from good to bad, the parent sits at {} and the culprit at {}",
        pct(&parent),
        pct(&culprit)
    );
    // On a large regression the log scale's shares are not the metric's: say both.
    if let Some(m) = levels.metric_share_apart(crate::hunt::steps::WHOLE, levels.ratio) {
        s += &format!(
            " (on the log scale the statistics read; in the metric's own unit the step is \
             {:.0}% of the regression, {}% interval {:.0} to {:.0}%)",
            100.0 * m.level,
            crate::posterior::LEVEL_PERCENT,
            100.0 * m.lo,
            100.0 * m.hi
        );
    }
    let r = rest(&parent, &culprit, floor);
    if r.after {
        s += &format!(
            "; the culprit is short of bad: more of the regression may come after it \
             (the part from {} to bad: a run over git revisions hunts it next, up to \
             classify.max_culprits culprits)",
            short(culprit_id)
        );
    }
    if r.before {
        s += &format!(
            "; the parent is already worse than good: some of the regression may come before \
             it (the part from good to {}: a run over git revisions hunts it next, up to \
             classify.max_culprits culprits)",
            short(parent_id)
        );
    }
    s
}

/// A centre on the oriented log scale back in the metric's unit.
pub fn unoriented(x: f64, direction: crate::config::Direction) -> f64 {
    match direction {
        crate::config::Direction::LowerIsBetter => x.exp(),
        crate::config::Direction::HigherIsBetter => (-x).exp(),
    }
}

/// The medians of `commits` host by host (`vm1: good 3.9 (4 boots), bad 63.1 (4 boots)`),
/// when more than one host measured them: a pool of unlike machines shows here, and its
/// host-to-host spread is part of the noise the model was estimated with.
pub fn per_host(state: &HuntState, commits: &[(&str, &str)]) -> Option<String> {
    let mut hosts: Vec<&str> = commits
        .iter()
        .flat_map(|(c, _)| state.boots.get(*c).into_iter().flatten())
        .map(|r| r.host.as_str())
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    if hosts.len() < 2 {
        return None;
    }
    let parts: Vec<String> = hosts
        .iter()
        .map(|h| {
            let sides: Vec<String> = commits
                .iter()
                .map(|(c, label)| {
                    let v: Vec<f64> = state
                        .boots
                        .get(*c)
                        .into_iter()
                        .flatten()
                        .filter(|r| r.host == *h)
                        .filter_map(|r| match &r.outcome {
                            BootOutcome::Measured { value, .. } => Some(*value),
                            BootOutcome::Failed { .. } => None,
                        })
                        .collect();
                    match v.len() {
                        0 => format!("{label} -"),
                        k => format!("{label} {:.3} ({k} boots)", median(&v)),
                    }
                })
                .collect();
            format!("{h}: {}", sides.join(", "))
        })
        .collect();
    Some(parts.join("; "))
}

/// Failed boots in a row after which a host that boots the same kernels worse than the rest
/// of the pool leaves it: one or two are what a flaky candidate does; three in a row on one
/// host, with one of those kernels measured on another host, point at the host.
pub const HOST_FAILURES_IN_A_ROW: usize = 3;

/// Why `host` should leave the pool, if its last [`HOST_FAILURES_IN_A_ROW`] boots all failed
/// and one of those commits was measured on another host.
pub fn failing_host(state: &HuntState, host: &str) -> Option<String> {
    // The host's boots in the order they finished: the journal order, which boot numbers
    // alone do not give across commits, so collect (commit, record) and sort by position.
    let mut mine: Vec<(&str, &BootRecord)> = state
        .boots
        .iter()
        .flat_map(|(c, rs)| rs.iter().map(move |r| (c.as_str(), r)))
        .filter(|(_, r)| r.host == host)
        .collect();
    mine.sort_by_key(|(_, r)| r.seq);
    let tail = mine.get(mine.len().checked_sub(HOST_FAILURES_IN_A_ROW)?..)?;
    if !tail
        .iter()
        .all(|(_, r)| matches!(r.outcome, BootOutcome::Failed { .. }))
    {
        return None;
    }
    let (commit, other) = tail.iter().find_map(|(c, _)| {
        state.boots.get(*c)?.iter().find_map(|r| match &r.outcome {
            BootOutcome::Measured { .. } if r.host != host => Some((*c, r.host.as_str())),
            _ => None,
        })
    })?;
    let last = match &tail[HOST_FAILURES_IN_A_ROW - 1].1.outcome {
        BootOutcome::Failed { reason, .. } => reason.as_str(),
        BootOutcome::Measured { .. } => "",
    };
    Some(format!(
        "its last {HOST_FAILURES_IN_A_ROW} boots failed (last: {last}), while {} measured \
         on {other}",
        short(commit)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Event;
    use crate::sequential::HostFailures;
    use std::path::PathBuf;

    /// Adds a finished boot of `commit` on `host`, measured or failed, through the reducer.
    fn add(state: &mut HuntState, commit: &str, host: &str, ok: bool) {
        let outcome = if ok {
            BootOutcome::Measured {
                kernel_release: String::new(),
                boot_id: String::new(),
                value: 1.0,
                result: firstbad_wire::WorkloadResult::empty("fsync-latency", 1.0),
                console: PathBuf::new(),
                boot_seconds: 1.0,
            }
        } else {
            BootOutcome::Failed {
                reason: format!("boot timeout on {host}"),
                console: PathBuf::new(),
                untestable: false,
            }
        };
        let boot = state.next_boot_number(commit);
        for e in [
            Event::BootStarted {
                commit: commit.into(),
                boot,
                host: host.into(),
            },
            Event::BootFinished {
                commit: commit.into(),
                boot,
                host: host.into(),
                outcome,
            },
        ] {
            state.apply(&e);
        }
    }

    #[test]
    fn a_host_that_fails_kernels_which_boot_elsewhere_leaves_the_pool() {
        let mut state = HuntState::default();
        add(&mut state, "a", "vm1", true);
        add(&mut state, "a", "vm2", true);
        add(&mut state, "b", "vm1", false);
        add(&mut state, "c", "vm1", false);
        add(&mut state, "b", "vm2", false);
        add(&mut state, "d", "vm2", false);
        assert_eq!(failing_host(&state, "vm1"), None, "two failures in a row");
        add(&mut state, "a", "vm1", false);
        let why = failing_host(&state, "vm1").expect("a booted on vm2, not on vm1");
        assert!(
            why.contains("last 3 boots failed") && why.contains("on vm2"),
            "{why}"
        );
        // vm2's failures are of kernels no other host has measured: the kernels', not its.
        add(&mut state, "e", "vm2", false);
        assert_eq!(failing_host(&state, "vm2"), None);
    }

    #[test]
    fn the_hosts_failure_rate_is_read_from_the_endpoints_only() {
        let mut state = HuntState::default();
        for k in 0..10 {
            add(&mut state, "good", "vm1", k != 3);
            add(&mut state, "bad", "vm1", true);
        }
        // A broken commit's failures are its own, not the host's.
        for _ in 0..5 {
            add(&mut state, "broken", "vm1", false);
        }
        let host = state.host_failures(&["good", "bad"]);
        assert_eq!(
            host,
            HostFailures {
                failed: 1,
                boots: 20
            }
        );
        // One boot in 20 failed: a commit that gave 10 values is skipped at its 4th failure
        // (ln(100) / ln(10) = 2, + 10 × ln(1.9) / ln(10) = 2.8 rounded down), where a sound
        // host skips it at its 3rd (2 + 10 / 8 rounded down).
        assert_eq!(sequential::failures_allowed(2, 10, host), 4);
        assert_eq!(
            sequential::failures_allowed(2, 10, HostFailures::default()),
            3
        );
    }

    #[test]
    fn a_culprit_that_is_part_of_the_regression_says_where_the_rest_is() {
        let at = |level: f64, half: f64| Level {
            level,
            lo: level - half,
            hi: level + half,
        };
        let lv = |parent, culprit, floor| StepLevels {
            parent,
            culprit,
            floor,
            ratio: None,
        };
        let (parent, culprit) = ("1111111111111111", "2222222222222222");
        // The whole step: levels and intervals, no advice.
        let whole = partial_summary(&lv(at(0.02, 0.2), at(0.97, 0.2), 0.05), parent, culprit);
        assert_eq!(
            whole,
            "of the way from good to bad, the parent sits at 2% (99% interval -18 to 22%) and \
             the culprit at 97% (99% interval 77 to 117%)"
        );
        // Half of it, the rest later: hunt on from the culprit.
        let first_half = partial_summary(&lv(at(0.0, 0.2), at(0.5, 0.2), 0.05), parent, culprit);
        assert!(
            first_half.ends_with(
                "; the culprit is short of bad: more of the regression may come after it \
                 (the part from 222222222222 to bad: a run over git revisions hunts it next, \
                 up to classify.max_culprits culprits)"
            ),
            "{first_half}"
        );
        assert!(!first_half.contains("before"), "{first_half}");
        // The second half: some came before the parent.
        let second_half = partial_summary(&lv(at(0.5, 0.2), at(1.0, 0.2), 0.05), parent, culprit);
        assert!(
            second_half.ends_with(
                "; the parent is already worse than good: some of the regression may come \
                 before it (the part from good to 111111111111: a run over git revisions hunts \
                 it next, up to classify.max_culprits culprits)"
            ),
            "{second_half}"
        );
        // Clearly short of bad, but by less than the floor: not worth a hunt.
        let nearly = partial_summary(&lv(at(0.0, 0.01), at(0.97, 0.01), 0.05), parent, culprit);
        assert!(!nearly.contains("hunt again"), "{nearly}");
        // A regression that multiplies the metric by 20: 65% of the way on the log scale is
        // 32% in the metric's unit, and the summary says both; at +30% the two agree and it
        // says one.
        let large = StepLevels {
            ratio: Some(20.0),
            ..lv(at(0.0, 0.0), at(0.65, 0.02), 0.05)
        };
        let said = partial_summary(&large, parent, culprit);
        assert!(
            said.contains(
                "the culprit at 65% (99% interval 63 to 67%) (on the log scale the statistics \
                 read; in the metric's own unit the step is 32% of the regression, 99% \
                 interval 29 to 34%)"
            ),
            "{said}"
        );
        let small = StepLevels {
            ratio: Some(1.3),
            ..large
        };
        assert!(!partial_summary(&small, parent, culprit).contains("own unit"));
    }
}
