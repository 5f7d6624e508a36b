//! Every metric the workload produced, the culprit's parent against the culprit: the table a
//! maintainer knows from the kernel test robot's mails (issue 34, item 2), where one metric
//! moving and its neighbours not is part of the diagnosis.

use super::model::CommitRef;
use crate::hunt::HuntState;
use crate::journal::BootOutcome;
use serde::Serialize;
use std::collections::BTreeMap;

/// One commit's side of a metric's row.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MetricSide {
    /// Mean over the commit's measured boots.
    pub mean: f64,
    /// Their sample standard deviation over the mean, in percent (0 with one boot).
    pub stddev_pct: f64,
    /// Measured boots with this metric.
    pub boots: usize,
}

/// One metric of the workload: the parent against the culprit.
#[derive(Debug, Clone, Serialize)]
pub struct MetricRow {
    /// The metric's name, as the agent reports it (`fsync_latency_p99_ms`).
    pub name: String,
    /// The culprit's first parent.
    pub parent: MetricSide,
    /// The culprit.
    pub culprit: MetricSide,
    /// Change of the mean, in percent of the parent's.
    pub change_pct: f64,
    /// Moved beyond its noise: every boot of one side above every boot of the other, and the
    /// change at least `min_effect`. With 3 boots a side no overlap happens by chance one
    /// time in ten; it flags what to read, the hunt's metric carries the statistics.
    pub moved: bool,
    /// The culprit reverted on top of bad, when it was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revert: Option<MetricSide>,
    /// Change of the revert's mean, in percent of the culprit's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revert_change_pct: Option<f64>,
}

/// Every metric both commits' boots produced, the hunt's own first.
#[derive(Debug, Clone, Serialize)]
pub struct MetricTable {
    /// The culprit's first parent.
    pub parent: CommitRef,
    /// The culprit.
    pub culprit: CommitRef,
    /// The culprit reverted on top of bad, when it was measured (issue 34).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revert: Option<CommitRef>,
    /// One row a metric.
    pub rows: Vec<MetricRow>,
}

/// Every metric's value on each measured boot of `commit`.
fn values(state: &HuntState, commit: &str) -> BTreeMap<String, Vec<f64>> {
    let mut by_metric: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for boot in state.boots.get(commit).into_iter().flatten() {
        if let BootOutcome::Measured { result, .. } = &boot.outcome {
            for (name, &x) in &result.metrics {
                by_metric.entry(name.clone()).or_default().push(x);
            }
        }
    }
    by_metric
}

fn side(v: &[f64]) -> MetricSide {
    let n = v.len() as f64;
    let mean = crate::stats::mean(v);
    let sd = if v.len() > 1 {
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    MetricSide {
        mean,
        stddev_pct: if mean != 0.0 {
            100.0 * sd / mean.abs()
        } else {
            0.0
        },
        boots: v.len(),
    }
}

/// Change from `from` to `to`, in percent of `from` (0 from 0).
fn change(from: &MetricSide, to: &MetricSide) -> f64 {
    if from.mean != 0.0 {
        100.0 * (to.mean - from.mean) / from.mean.abs()
    } else {
        0.0
    }
}

/// The table for `culprit` against `parent`, with the culprit's `revert` on top of bad when
/// it has measured boots: None when the parent or the culprit has none.
pub fn table(
    state: &HuntState,
    [parent, culprit]: [CommitRef; 2],
    revert: Option<CommitRef>,
    metric: &str,
    min_effect: f64,
) -> Option<MetricTable> {
    let (before, after) = (values(state, &parent.id), values(state, &culprit.id));
    let reverted = revert.as_ref().map(|r| values(state, &r.id));
    let revert = revert.filter(|_| reverted.as_ref().is_some_and(|v| !v.is_empty()));
    let mut rows: Vec<MetricRow> = before
        .iter()
        .filter_map(|(name, b)| {
            let a = after.get(name)?;
            let (p, c) = (side(b), side(a));
            let change_pct = change(&p, &c);
            let r = reverted.as_ref().and_then(|v| v.get(name)).map(|v| side(v));
            let max = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
            let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
            let apart = min(a) > max(b) || max(a) < min(b);
            Some(MetricRow {
                name: name.clone(),
                parent: p,
                culprit: c,
                change_pct,
                moved: apart && change_pct.abs() >= 100.0 * min_effect,
                revert: r,
                revert_change_pct: r.map(|r| change(&c, &r)),
            })
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    // The hunt's metric first, then by name.
    rows.sort_by_key(|r| r.name != metric);
    Some(MetricTable {
        parent,
        culprit,
        revert,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_is_the_mean_and_the_relative_standard_deviation() {
        let s = side(&[9.0, 10.0, 11.0]);
        assert_eq!((s.mean, s.boots), (10.0, 3));
        assert!((s.stddev_pct - 10.0).abs() < 1e-9, "{s:?}");
        assert_eq!(side(&[4.0]).stddev_pct, 0.0);
    }
}
