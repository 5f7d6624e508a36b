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
}

/// Every metric both commits' boots produced, the hunt's own first.
#[derive(Debug, Clone, Serialize)]
pub struct MetricTable {
    /// The culprit's first parent.
    pub parent: CommitRef,
    /// The culprit.
    pub culprit: CommitRef,
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

/// The table for `culprit` against `parent`: None when either has no measured boot.
pub fn table(
    state: &HuntState,
    parent: CommitRef,
    culprit: CommitRef,
    metric: &str,
    min_effect: f64,
) -> Option<MetricTable> {
    let (before, after) = (values(state, &parent.id), values(state, &culprit.id));
    let mut rows: Vec<MetricRow> = before
        .iter()
        .filter_map(|(name, b)| {
            let a = after.get(name)?;
            let (p, c) = (side(b), side(a));
            let change_pct = if p.mean != 0.0 {
                100.0 * (c.mean - p.mean) / p.mean.abs()
            } else {
                0.0
            };
            let max = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
            let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
            let apart = min(a) > max(b) || max(a) < min(b);
            Some(MetricRow {
                name: name.clone(),
                parent: p,
                culprit: c,
                change_pct,
                moved: apart && change_pct.abs() >= 100.0 * min_effect,
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
