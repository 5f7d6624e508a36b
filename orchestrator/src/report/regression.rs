//! What differs between the good and bad endpoints: the regression's size with bootstrap
//! intervals over whole boots ([`regression`]), and the test host's settings that changed
//! ([`snapshot_diff`]).

use super::model::{CommitReport, EndpointStats, Regression, SettingDiff};
use super::stats;
use crate::hunt::HuntState;
use crate::journal::BootOutcome;

/// The compared series of a result: the one the metric is named after
/// (`fsync_latency_p50_ms` -> `fsync_latency`), else the first one.
pub(super) fn series_of<'r>(
    result: &'r firstbad_wire::WorkloadResult,
    metric: &str,
) -> Option<(&'r String, &'r firstbad_wire::Series)> {
    result
        .series
        .iter()
        .filter(|(name, _)| metric.starts_with(name.as_str()))
        .max_by_key(|(name, _)| name.len())
        .or_else(|| result.series.iter().next())
}

/// How many sub-samples a run kept of how many it gave, for a hunt whose runs gave more than
/// a run keeps ([`crate::metric::KEPT_SAMPLES`]; issue 61, finding 2).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SamplesKept {
    /// Samples kept of the run that gave the most.
    pub kept: usize,
    /// Samples that run gave.
    pub of: u64,
    /// The sentence every report prints.
    pub note: String,
}

impl SamplesKept {
    /// `kept` of `of`, with its sentence.
    pub fn new(kept: usize, of: u64) -> SamplesKept {
        let note = format!(
            "A run gave up to {of} samples: kept {kept} of {of} samples of such a run, evenly \
             spaced in the order they came; each run's value is computed from all of them, \
             the pooled figures and plots from those kept.",
            kept = thousands(kept as u64),
            of = thousands(of),
        );
        SamplesKept { kept, of, note }
    }

    /// The sentence every report prints.
    pub fn words(&self) -> &str {
        &self.note
    }
}

/// `n` with a comma every three digits (`1,000,000`).
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// The [`SamplesKept`] of the run that gave the most samples, when any run's were thinned.
pub fn samples_kept(state: &HuntState, metric: &str) -> Option<SamplesKept> {
    state
        .boots
        .values()
        .flatten()
        .filter_map(|b| match &b.outcome {
            BootOutcome::Measured { result, .. } => {
                series_of(result, metric).and_then(|(_, s)| s.count.map(|of| (of, s.samples.len())))
            }
            BootOutcome::Failed { .. } => None,
        })
        .max()
        .map(|(of, kept)| SamplesKept::new(kept, of))
}

/// The unit of the compared series (`ms`), from the first measured boot.
pub(super) fn series_name_unit(state: &HuntState, metric: &str) -> Option<(String, String)> {
    state
        .boots
        .values()
        .flatten()
        .find_map(|b| match &b.outcome {
            BootOutcome::Measured { result, .. } => {
                series_of(result, metric).map(|(n, s)| (n.clone(), s.unit.clone()))
            }
            BootOutcome::Failed { .. } => None,
        })
}

/// The regression from the endpoints' measured boots (their samples, else their metric), in
/// the compared series' name and unit; `None` until both endpoints have a measured boot.
pub(super) fn regression(
    good: &CommitReport,
    bad: &CommitReport,
    metric: &str,
    unit: Option<(String, String)>,
) -> Option<Regression> {
    // Boots are the independent unit: fsyncs within one boot share its page cache, disk
    // layout and timer noise, so intervals resample whole boots.
    let groups = |c: &CommitReport| -> Vec<Vec<f64>> {
        c.boots
            .iter()
            .filter(|b| b.status == "measured")
            .map(|b| {
                if b.samples.is_empty() {
                    b.value.into_iter().collect()
                } else {
                    b.samples.clone()
                }
            })
            .collect()
    };
    let (g, b) = (groups(good), groups(bad));
    if g.is_empty() || b.is_empty() {
        return None;
    }
    let cmp = stats::compare_clustered(&g, &b, stats::BOOTSTRAP_REPLICATES, stats::SEED);
    let endpoint = |groups: &[Vec<f64>], s: &stats::Summary| EndpointStats {
        boots: groups.len(),
        samples: groups.iter().map(Vec::len).sum(),
        median: s.median,
        p99: s.p99,
    };
    let (series, unit) = unit.unwrap_or_else(|| (metric.to_owned(), String::new()));
    Some(Regression {
        series,
        unit,
        good: endpoint(&g, &cmp.good),
        bad: endpoint(&b, &cmp.bad),
        median_ratio: cmp.median_ratio,
        p99_ratio: cmp.p99_ratio,
        interval_method: format!(
            "95% percentile-bootstrap intervals, {} replicates resampling whole boots (the \
             samples of one boot are not independent), fixed seed",
            stats::BOOTSTRAP_REPLICATES
        ),
    })
}

/// The snapshot settings whose values differ between the good and the bad endpoint's boots.
pub(super) fn snapshot_diff(good: &CommitReport, bad: &CommitReport) -> Vec<SettingDiff> {
    let values = |c: &CommitReport, key: &str| -> Vec<String> {
        let mut v: Vec<String> = c
            .boots
            .iter()
            .filter_map(|b| b.snapshot.get(key).cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let keys: std::collections::BTreeSet<&String> = good
        .boots
        .iter()
        .chain(&bad.boots)
        .flat_map(|b| b.snapshot.keys())
        .collect();
    keys.into_iter()
        // The release names the commit and differs by design; the command line carries it.
        .filter(|k| !k.ends_with("kernel_release") && k.as_str() != "boot_id")
        .filter_map(|k| {
            let (gv, bv) = (values(good, k), values(bad, k));
            (gv != bv).then(|| SettingDiff {
                setting: k.clone(),
                good: gv,
                bad: bv,
            })
        })
        .collect()
}
