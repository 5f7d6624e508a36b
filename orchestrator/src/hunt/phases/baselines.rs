//! The endpoints measured until the mode's judge is established, or the regression refuted.
//!
//! Baselines mode boots good and bad interleaved in balanced pairs, each pair in a seeded
//! random order, so that a host that drifts while they are taken hits both alike; relative
//! mode measures good, then judges bad against it; absolute mode judges each endpoint
//! against the threshold.

use super::super::driver::{next_side, Decision, Driver, StopReason};
use super::super::judge::{endpoint_failing, verdict_of, Judge};
use super::super::summary::per_host;
use super::super::HuntState;
use crate::config::ClassifyMode;
use crate::journal::{Event, HuntEnd, Verdict};
use crate::sequential::{
    assess_baselines, AbsoluteTest, BaselineOutcome, HostFailures, Model, RELATIVE_GOOD_BOOTS,
};
use crate::stats::median;

/// The baselines phase's next step.
pub fn next(d: &Driver, state: &HuntState) -> Decision {
    let s = &d.plan.settings;
    let (good, bad) = (d.plan.good.as_str(), d.plan.bad.as_str());
    for (commit, which) in [(good, "good"), (bad, "bad")] {
        let boots = state.boots.get(commit).map_or(&[][..], Vec::as_slice);
        if let Some(why) = endpoint_failing(s, commit, which, boots) {
            return Decision::Stop(StopReason::Endpoint(why));
        }
    }
    // A later step's endpoints, booted in earlier stages: their boots first, once each (a
    // stage that has boots of an end, carried or its own, carries none more of it).
    if let Some((commit, boots)) = d
        .plan
        .carry
        .iter()
        .find(|(c, b)| !b.is_empty() && !state.boots.contains_key(c))
    {
        return Decision::Record(Event::BootsCarried {
            commit: commit.clone(),
            boots: boots.clone(),
        });
    }
    let dir = s.direction;
    let seq = s.sequential();
    match s.classify.mode {
        ClassifyMode::Baselines => {
            let (g, b) = (state.values(good), state.values(bad));
            match assess_baselines(&g, &b, dir, &seq) {
                BaselineOutcome::Confirmed(_, summary) => {
                    let n = g.len().min(b.len()).min(seq.last_look);
                    let summary = match per_host(state, &[(good, "good"), (bad, "bad")]) {
                        Some(hosts) => format!("{summary}; per host: {hosts}"),
                        None => summary,
                    };
                    confirmed(summary, Some(n))
                }
                BaselineOutcome::Refuted(message) => not_reproduced(d, state, message),
                BaselineOutcome::NeedMore => {
                    let mut counts = [
                        g.len() + state.running_boots(good),
                        b.len() + state.running_boots(bad),
                    ];
                    d.boots_for(state, |_| {
                        let i = next_side(&counts, d.plan.seed);
                        counts[i] += 1;
                        Some([good, bad][i].to_owned())
                    })
                }
            }
        }
        ClassifyMode::Relative(r) => {
            let n = RELATIVE_GOOD_BOOTS;
            let g = state.values(good);
            if g.len() < n {
                let mut more = (n - g.len()).saturating_sub(state.running_boots(good));
                return d.boots_for(state, |_| {
                    (more > 0).then(|| {
                        more -= 1;
                        good.to_owned()
                    })
                });
            }
            let model = Model::relative(&g[..n], r, dir);
            let judge = Judge::Model(model);
            let values = state.values(bad);
            match verdict_of(
                s,
                &judge,
                &values,
                &state.failures(bad),
                HostFailures::default(),
            ) {
                None => more_of(d, state, bad),
                Some((Verdict::Bad, why)) => confirmed(
                    format!(
                        "regression confirmed: the bad endpoint is at least {:.0}% worse than \
                         good ({n} good boots, median {:.3}, noise {:.1}% per boot); bad \
                         endpoint {why}",
                        r * 100.0,
                        median(&g[..n]),
                        model.sigma * 100.0
                    ),
                    Some(n),
                ),
                Some((_, why)) => not_reproduced(
                    d,
                    state,
                    format!(
                        "the bad endpoint is not {:.0}% worse than good ({n} good boots, median \
                         {:.3}): {why}",
                        r * 100.0,
                        median(&g[..n])
                    ),
                ),
            }
        }
        ClassifyMode::Absolute(t) => {
            let judge = Judge::Absolute(AbsoluteTest {
                threshold: t,
                direction: dir,
            });
            let mut said = Vec::new();
            for (endpoint, which, want) in
                [(good, "good", Verdict::Good), (bad, "bad", Verdict::Bad)]
            {
                let values = state.values(endpoint);
                let failures = state.failures(endpoint);
                match verdict_of(s, &judge, &values, &failures, HostFailures::default()) {
                    None => return more_of(d, state, endpoint),
                    Some((v, why)) if v != want => {
                        return not_reproduced(
                            d,
                            state,
                            format!(
                                "against the threshold {t}, the {which} endpoint is not {}: {why}",
                                want.as_str()
                            ),
                        )
                    }
                    Some((_, why)) => said.push(format!("{which} endpoint {why}")),
                }
            }
            confirmed(
                format!("threshold {t} separates the endpoints: {}", said.join("; ")),
                None,
            )
        }
    }
}

/// Another boot of an endpoint that its sequential test is still out on, on each free slot
/// (a pool finishes the test in fewer rounds).
fn more_of(d: &Driver, state: &HuntState, commit: &str) -> Decision {
    d.boots_for(state, |_| Some(commit.to_owned()))
}

fn confirmed(summary: String, boots: Option<usize>) -> Decision {
    Decision::Record(Event::BaselinesConfirmed { summary, boots })
}

fn not_reproduced(d: &Driver, state: &HuntState, message: String) -> Decision {
    d.finish(
        state,
        HuntEnd::NotReproduced {
            message: format!("{}: {message}", d.plan.settings.metric),
        },
    )
}

/// `firstbad watch`: `n` measured boots of each endpoint (a night's reference and head),
/// interleaved in seeded pairs as the baselines are, so that a host that moves during the
/// night moves both alike; then the end. The series' detector judges the values, not the hunt.
/// A failed boot is booted again, within the endpoint failure rule of every hunt.
pub fn pairs(d: &Driver, state: &HuntState, n: usize) -> Decision {
    let (good, bad) = (d.plan.good.as_str(), d.plan.bad.as_str());
    for (commit, which) in [(good, "reference"), (bad, "head")] {
        let boots = state.boots.get(commit).map_or(&[][..], Vec::as_slice);
        if let Some(why) = endpoint_failing(&d.plan.settings, commit, which, boots) {
            return Decision::Stop(StopReason::Endpoint(why));
        }
    }
    let (g, b) = (state.values(good), state.values(bad));
    if g.len() >= n && b.len() >= n {
        return d.finish(
            state,
            HuntEnd::Measured {
                summary: format!(
                    "{}: {n} boots each, interleaved: reference median {:.3}, head median {:.3}",
                    d.plan.settings.metric,
                    median(&g),
                    median(&b)
                ),
            },
        );
    }
    let mut counts = [
        g.len() + state.running_boots(good),
        b.len() + state.running_boots(bad),
    ];
    d.boots_for(state, |_| {
        if counts.iter().all(|&c| c >= n) {
            return None;
        }
        let i = next_side(&counts, d.plan.seed);
        counts[i] += 1;
        Some([good, bad][i].to_owned())
    })
}
