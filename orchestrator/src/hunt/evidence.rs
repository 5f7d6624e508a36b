//! Every boot of a hunt as the posterior reads it: the evidence of each candidate, the good
//! endpoint's re-measurements, and the timeline the host's move is fitted on.

use super::judge::Settings;
use super::HuntState;
use crate::posterior::{commit_evidence, Evidence};
use crate::search::Dag;
use crate::sequential::{HostLevel, Model, Timeline, WANDER_REF_EVERY};
use std::collections::HashMap;

/// The boots of `id` that are evidence about the culprit, with their boot times: all of them
/// but the bad endpoint's (node 0's) baseline boots in baselines mode, which the model's bad
/// centre already stands for: counted again, they would make the posterior's shared bad centre
/// look twice as sure.
pub fn evidence_boots(s: &Settings, state: &HuntState, dag: &Dag, id: &str) -> Vec<(f64, f64)> {
    let mut boots = state.timed(id);
    if s.baselines_mode() && dag.id(0) == id {
        let n = state.baseline_boots.unwrap_or(0).min(boots.len());
        boots.drain(..n);
    }
    boots
}

/// The host's level over the hunt's boots ([`HostLevel`]), from every boot of the endpoints:
/// the good one's, and in baselines mode the bad one's (relative mode's bad centre has none);
/// every other commit's boots tell it whether the host wanders.
pub fn host_level(
    s: &Settings,
    state: &HuntState,
    model: &Model,
    good: &str,
    bad: &str,
) -> HostLevel {
    let mut boots: Vec<(f64, f64, bool)> = state
        .timed(good)
        .into_iter()
        .map(|(v, t)| (v, t, false))
        .collect();
    if s.baselines_mode() {
        boots.extend(state.timed(bad).into_iter().map(|(v, t)| (v, t, true)));
    }
    // In id order: the same journal reads the same sums.
    let mut ids: Vec<&String> = state
        .boots
        .keys()
        .filter(|c| *c != good && *c != bad)
        .collect();
    ids.sort();
    let others: Vec<Vec<(f64, f64)>> = ids.into_iter().map(|c| state.timed(c)).collect();
    HostLevel::new(model, &boots, &others)
}

/// The endpoint to boot next as a reference, when the host wanders ([`HostLevel::wanders`])
/// and none of the last [`WANDER_REF_EVERY`] boots started was one: the side with fewer boots,
/// good on a tie (relative mode: good). `None` on a steady host, which spends no boot on it.
pub fn reference_due(
    s: &Settings,
    state: &HuntState,
    level: &HostLevel,
    good: &str,
    bad: &str,
) -> Option<String> {
    if !level.wanders() {
        return None;
    }
    let sides: &[&str] = if s.baselines_mode() {
        &[good, bad]
    } else {
        &[good]
    };
    let last = sides.iter().filter_map(|c| state.last_started(c)).max()?;
    if state.boots_started.saturating_sub(last + 1) < WANDER_REF_EVERY {
        return None;
    }
    let booted = |c: &str| state.boots.get(c).map_or(0, Vec::len) + state.running_boots(c);
    sides
        .iter()
        .min_by_key(|c| booted(c))
        .map(|c| (*c).to_owned())
}

/// The good endpoint's boots after the baselines (the drift checks' re-measurements), with
/// their boot times: good under every hypothesis, and the posterior's firmest hold on the
/// host's trend.
pub fn reference_boots(state: &HuntState, good: &str) -> Vec<(f64, f64)> {
    let mut boots = state.timed(good);
    boots.drain(..state.baseline_boots.unwrap_or(0).min(boots.len()));
    boots
}

/// The mean boot time of the baseline boots the model came from: where its centres stand on
/// the posterior's trend axis. In relative mode only the good endpoint has baseline boots.
pub fn trend_origin(s: &Settings, state: &HuntState, good: &str, bad: &str) -> f64 {
    let n = state.baseline_boots.unwrap_or(0);
    let endpoints: &[&str] = if s.baselines_mode() {
        &[good, bad]
    } else {
        &[good]
    };
    let times: Vec<f64> = endpoints
        .iter()
        .flat_map(|c| state.timed(c).into_iter().take(n))
        .map(|b| b.1)
        .collect();
    if times.is_empty() {
        0.0
    } else {
        times.iter().sum::<f64>() / times.len() as f64
    }
}

/// What the posterior reads from a hunt's boots ([`posterior_inputs`]).
pub struct PosteriorInputs {
    /// The hypotheses (indices into the hunt's) whose commits gave evidence.
    pub tested: Vec<usize>,
    /// Their rows ([`bad_under`]).
    pub under: Vec<Vec<bool>>,
    /// Their evidence.
    pub evidence: Vec<Evidence>,
    /// The good endpoint's re-measurements, good under every hypothesis.
    pub reference: Option<Evidence>,
    /// The timeline the boots were read on.
    pub line: Timeline,
    /// The host's level the boots were read less ([`host_level`]).
    pub level: HostLevel,
}

/// Every boot of the hunt as the posterior reads it, for the posterior phase and the final
/// confidence alike: each hypothesis's commit's evidence on the timeline of the baselines and
/// the good endpoint's re-measurements. `rows` keeps each tested commit's row across calls;
/// `hypotheses` are dag indices in increasing order.
pub fn posterior_inputs(
    s: &Settings,
    state: &HuntState,
    good: &str,
    model: &Model,
    dag: &Dag,
    hypotheses: &[usize],
    rows: &mut HashMap<usize, Vec<bool>>,
) -> PosteriorInputs {
    // On a host that wanders, every boot is read less the host's level at its time.
    let level = host_level(s, state, model, good, dag.id(0));
    let remeasured = level.adjusted(model, &reference_boots(state, good));
    let origin = trend_origin(s, state, good, dag.id(0));
    let line = Timeline::new(model, origin, &remeasured);
    // The booted hypotheses, in hypothesis order: a hunt boots few of its candidates, so
    // they are found from its boots, not by looking up every candidate.
    let mut booted: Vec<(usize, usize)> = state
        .boots
        .keys()
        .filter_map(|id| {
            let t = dag.index_of(id)?;
            Some((hypotheses.binary_search(&t).ok()?, t))
        })
        .collect();
    booted.sort_unstable();
    let (mut tested, mut under, mut evidence) = (Vec::new(), Vec::new(), Vec::new());
    for (h, t) in booted {
        let boots = level.adjusted(model, &evidence_boots(s, state, dag, dag.id(t)));
        if let Some(e) = commit_evidence(model, &line, &boots) {
            let row = rows
                .entry(t)
                .or_insert_with(|| bad_under(dag, hypotheses, t))
                .clone();
            tested.push(h);
            under.push(row);
            evidence.push(e);
        }
    }
    PosteriorInputs {
        tested,
        under,
        evidence,
        reference: commit_evidence(model, &line, &remeasured),
        line,
        level,
    }
}

/// Which candidate hypotheses make a commit bad: itself and its ancestors in the range.
pub fn bad_under(dag: &Dag, hypotheses: &[usize], tested: usize) -> Vec<bool> {
    let mut seen = vec![false; dag.len()];
    let mut stack = vec![tested];
    while let Some(i) = stack.pop() {
        if !std::mem::replace(&mut seen[i], true) {
            stack.extend(dag.parents_of(i));
        }
    }
    hypotheses.iter().map(|&h| seen[h]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ClassifyConfig, Direction};
    use crate::hunt::judge::RefineProbe;

    fn settings() -> Settings {
        Settings {
            classify: ClassifyConfig::defaults(),
            direction: Direction::LowerIsBetter,
            metric: "p50".into(),
            split: true,
            probe: RefineProbe::default(),
            same_kernel: true,
        }
    }

    /// Baselines of 10 ms against 11 ms, σ about 2%, then a candidate: on a steady host no
    /// reference is ever due; on one whose level moved by 3σ for a stretch of the baselines and
    /// of the candidate's boots, an endpoint is booted every second boot, the one with fewer
    /// boots (what reads the candidate's boots against them is `sequential::wander`'s test).
    #[test]
    fn a_reference_is_due_every_second_boot_only_on_a_host_that_wanders() {
        let s = settings();
        let noise = [
            0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 0.2, -0.2, 0.8, -0.8, 0.0,
        ];
        let hunt = |shift: &dyn Fn(usize) -> f64| {
            let mut state = HuntState::default();
            let mut i = 0;
            for pair in 0..12 {
                for (commit, centre) in [("good", 10.0f64), ("bad", 11.0)] {
                    let z = noise[(pair + usize::from(commit == "bad") * 5) % noise.len()];
                    state.record_boot(commit, centre * (0.02 * (z + shift(i))).exp());
                    i += 1;
                }
            }
            state.baseline_boots = Some(12);
            for z in &noise[..6] {
                state.record_boot("c", 10.0 * (0.02 * (z + shift(i))).exp());
                i += 1;
            }
            state
        };
        let model = |state: &HuntState| {
            Model::from_baselines(
                &state.values("good"),
                &state.values("bad"),
                Direction::LowerIsBetter,
            )
        };
        let steady = hunt(&|_| 0.0);
        let m = model(&steady);
        let level = host_level(&s, &steady, &m, "good", "bad");
        assert!(!level.wanders(), "{level:?}");
        assert_eq!(reference_due(&s, &steady, &level, "good", "bad"), None);

        // 3σ up from boot 8 to 19 and from boot 24 on: the last baselines and the candidate.
        let wandering = hunt(&|i| {
            if (8..20).contains(&i) || i >= 24 {
                3.0
            } else {
                0.0
            }
        });
        let m = model(&wandering);
        let level = host_level(&s, &wandering, &m, "good", "bad");
        assert!(level.wanders(), "{level:?}");
        assert_eq!(
            reference_due(&s, &wandering, &level, "good", "bad").as_deref(),
            Some("good"),
            "six boots since the last endpoint's, good and bad booted alike: good first"
        );
        let mut after = wandering.clone();
        after.record_boot("good", 10.0);
        assert_eq!(reference_due(&s, &after, &level, "good", "bad"), None);
        after.record_boot("c", 10.0);
        after.record_boot("c", 10.0);
        assert_eq!(
            reference_due(&s, &after, &level, "good", "bad").as_deref(),
            Some("bad")
        );
    }
}
