//! How a commit's boots become a verdict: the mode's judge, the sequential test, the skip rule
//! for failed boots.

use super::short;
use crate::config::{ClassifyConfig, ClassifyMode, Direction};
use crate::journal::{BootOutcome, Verdict};
use crate::sequential::{self, AbsoluteTest, Call, HostFailures, Model, SequentialConfig};
use crate::stats::median;

/// The settings of a hunt that its decisions read: what the hunt file says about judging.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `[classify]`.
    pub classify: ClassifyConfig,
    /// Which way is worse for the metric.
    pub direction: Direction,
    /// The metric's name, for messages.
    pub metric: String,
    /// Commits outside the hunt's paths share a class with one that changes them: false when
    /// `paths` is set (the posterior then answers a class by its tested member).
    pub split: bool,
    /// Which commit the posterior phase boots next.
    pub probe: RefineProbe,
    /// Commits whose builds are one kernel share their verdicts ([`super::same_kernel`]);
    /// off with `[build] prune = false` or `--no-prune`, which boot every commit.
    pub same_kernel: bool,
}

/// Which commit the posterior phase boots next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RefineProbe {
    /// The boot with the most expected information per unit of cost, over every tested
    /// commit and a spread of untested ones ([`crate::posterior::refine_step`]): the product's.
    #[default]
    Information,
    /// Only the boundary: the most probable culprit and its first parent, the one with fewer
    /// boots first. Measured in the simulator against `Information` (issue 18, item 8;
    /// docs/simulation.md) and not chosen; `firstbad sim --strategy firstbad-run-boundary`.
    Boundary,
}

impl Settings {
    /// The sequential test's parameters.
    pub fn sequential(&self) -> SequentialConfig {
        SequentialConfig::from(&self.classify)
    }

    /// Whether both endpoints are measured as references (`mode = "baselines"`).
    pub fn baselines_mode(&self) -> bool {
        matches!(self.classify.mode, ClassifyMode::Baselines)
    }
}

/// How commits are judged once the endpoints are measured.
#[derive(Debug, Clone, Copy)]
pub enum Judge {
    /// Like good or like bad, on a model of both (baselines or relative mode).
    Model(Model),
    /// Past an absolute threshold or not.
    Absolute(AbsoluteTest),
}

impl Judge {
    /// The sequential call on `values` and its log-likelihood ratio.
    pub fn classify(&self, values: &[f64], cfg: &SequentialConfig) -> (Call, f64) {
        match self {
            Judge::Model(m) => sequential::classify(m, values, cfg),
            Judge::Absolute(a) => a.classify(values, cfg),
        }
    }

    /// The model, in the modes that have one.
    pub fn model(&self) -> Option<&Model> {
        match self {
            Judge::Model(m) => Some(m),
            Judge::Absolute(_) => None,
        }
    }

    /// The judge of a hunt whose baselines are journalled: the same boots give the same model.
    /// `n` is clamped to the boots there are, so that no journal can index past them.
    pub fn from_baselines(s: &Settings, good: &[f64], bad: &[f64], n: usize) -> Judge {
        let dir = s.direction;
        match s.classify.mode {
            ClassifyMode::Baselines => {
                let n = n.min(good.len()).min(bad.len());
                Judge::Model(Model::from_baselines(&good[..n], &bad[..n], dir))
            }
            ClassifyMode::Relative(r) => {
                Judge::Model(Model::relative(&good[..n.min(good.len())], r, dir))
            }
            ClassifyMode::Absolute(t) => Judge::Absolute(AbsoluteTest {
                threshold: t,
                direction: dir,
            }),
        }
    }
}

/// The verdict the boots of a built commit give so far, or `None` while the sequential test
/// wants another boot. `host`: how often the endpoints' boots fail, which sets how many
/// failures skip the commit.
pub fn verdict_of(
    s: &Settings,
    judge: &Judge,
    values: &[f64],
    failures: &[String],
    host: HostFailures,
) -> Option<(Verdict, String)> {
    let c = &s.classify;
    let seq = s.sequential();
    let (call, llr) = judge.classify(values, &seq);
    let k = values.len();
    let figures = format!(
        "{k} boot(s), median {:.3}, log-likelihood ratio {llr:+.2} (bad at {:+.2}, good at {:+.2})",
        median(values),
        seq.upper(),
        seq.lower()
    );
    match call {
        Call::Bad if k >= c.min_boots as usize => {
            return Some((Verdict::Bad, format!("like bad: {figures}")))
        }
        Call::Good if k >= c.min_boots as usize => {
            return Some((Verdict::Good, format!("like good: {figures}")))
        }
        Call::Undecided => return Some((Verdict::Skip, format!("undecided after {figures}"))),
        _ => {}
    }
    if failures.len() >= sequential::failures_allowed(c.max_failed_boots as usize, k, host) {
        return Some((
            Verdict::Skip,
            format!(
                "{} boots failed, {k} measured{}; last: {}",
                failures.len(),
                if host.boots > 0 {
                    format!(" (the endpoints: {} of {} failed)", host.failed, host.boots)
                } else {
                    String::new()
                },
                failures.last().map(String::as_str).unwrap_or("")
            ),
        ));
    }
    None
}

/// Failed boots in a row that stop a hunt at an endpoint: on a host failing 10% of its boots,
/// 3 in a row came by chance in about 6% of `firstbad sim`'s hunts (the endpoints boot ~100
/// times in a hunt); 5 in a row come once in 10^5 positions, and a kernel that never boots
/// costs 2 boots more to be told apart.
pub const ENDPOINT_RUN: usize = 5;

/// Why the hunt cannot go on with an endpoint that keeps failing, if it does: its last
/// [`ENDPOINT_RUN`] boots (or `max_failed_boots + 1`, if more) all failed, a run of failures
/// and not the lab's odd one, or it fails more often than it measures, as a broken kernel does.
///
/// The endpoints' boots are what measures the hosts' failure rate, so their failures cannot be
/// judged against it; and a total allowed to grow by one per 8 values was crossed by chance on
/// a host failing 10% of its boots: the product's driver in `firstbad sim` (N = 1024, Δ/σ = 1,
/// 10% failed boots) stopped 29.7% of its hunts for a person that way, where the simulator's
/// old copy of the loop never checked.
pub fn endpoint_failing(
    s: &Settings,
    commit: &str,
    which: &str,
    boots: &[super::BootRecord],
) -> Option<String> {
    let failed = |r: &&super::BootRecord| matches!(r.outcome, BootOutcome::Failed { .. });
    let run = (s.classify.max_failed_boots as usize + 1).max(ENDPOINT_RUN);
    let failures: Vec<&super::BootRecord> = boots.iter().filter(failed).collect();
    let in_a_row = boots.len() >= run && boots[boots.len() - run..].iter().all(|r| failed(&r));
    let mostly = failures.len() >= run && 2 * failures.len() > boots.len();
    (in_a_row || mostly).then(|| {
        let last = match failures.last().map(|r| &r.outcome) {
            Some(BootOutcome::Failed { reason, .. }) => reason.as_str(),
            _ => "",
        };
        format!(
            "the {which} endpoint {} failed to boot or measure {} times in {} boots{}; last: {last}",
            short(commit),
            failures.len(),
            boots.len(),
            if in_a_row {
                format!(", the last {run} in a row")
            } else {
                String::new()
            }
        )
    })
}
