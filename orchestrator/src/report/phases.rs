//! What the phases around the search add to a report: the forecast made before it, the
//! commits pruning left out of it, and the culprit's revert on top of bad after it.

use super::model::{CommitRef, Estimate};
use crate::hunt::HuntState;
use crate::journal::Recovers;
use serde::Serialize;

/// The culprit reverted on top of bad ([`crate::hunt::Reverted`]).
#[derive(Debug, Clone, Serialize)]
pub struct RevertReport {
    /// The culprit reverted.
    pub culprit: String,
    /// The culprits reverted together with it (the run's revert of every culprit it
    /// confirmed, `hunt::steps::TOGETHER`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<String>,
    /// The commit it was reverted onto (the bad endpoint).
    pub onto: String,
    /// The revert commit firstbad made, when the revert applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revert: Option<String>,
    /// Files in conflict, when it did not apply cleanly.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// "all", "part", "nothing", "undecided", "not measured"; "in progress" before its
    /// result, while the hunt runs.
    pub recovers: &'static str,
    /// The share of the regression (good to bad) the revert recovers, with its 99% interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered: Option<Estimate>,
    /// The figures, for a person.
    pub summary: String,
}

/// The forecast and what the hunt spent after it.
#[derive(Debug, Clone, Serialize)]
pub struct ForecastReport {
    /// The forecast as journalled.
    #[serde(flatten)]
    pub forecast: crate::journal::Forecast,
    /// Boots finished after the forecast (failed ones too), so far or in all.
    pub spent_boots: usize,
}

/// What pruning left out of the range, with why.
#[derive(Debug, Clone, Serialize)]
pub struct PrunedReport {
    /// Source files the endpoints' builds read.
    pub inputs: usize,
    /// Seconds the pruning took.
    pub seconds: f64,
    /// Why the range was not pruned, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Each commit left out (compared with its first parent), with what it touches.
    pub commits: Vec<PrunedCommit>,
}

/// One commit pruning left out.
#[derive(Debug, Clone, Serialize)]
pub struct PrunedCommit {
    /// The commit.
    pub commit: CommitRef,
    /// "touches only drivers/scsi/lpfc/lpfc_init.c (not built)".
    pub reason: String,
}

/// [`RevertReport::recovers`] of a revert whose result is still to come.
pub(super) const IN_PROGRESS: &str = "in progress";

/// The revert on top of `bad` as the journal has it, finished or under way.
pub(super) fn revert_report(state: &HuntState, bad: &str) -> Option<RevertReport> {
    use crate::build::revert::RevertMade;
    let start = state.revert.as_ref()?;
    let (revert, conflicts) = match &start.made {
        RevertMade::Applied { revert } => (Some(revert.clone()), Vec::new()),
        RevertMade::Conflicts { files } => (None, files.clone()),
        RevertMade::Empty | RevertMade::Failed { .. } => (None, Vec::new()),
    };
    let done = state.reverted.as_ref();
    Some(RevertReport {
        culprit: start.commit.clone(),
        with: start.with.clone(),
        onto: bad.to_owned(),
        revert,
        conflicts,
        recovers: match done {
            Some(r) => r.recovers.as_str(),
            // Ended without its result: `classify.revert` was turned off on a rerun.
            None if state.end.is_some() => Recovers::NotMeasured.as_str(),
            None => IN_PROGRESS,
        },
        recovered: done
            .and_then(|r| r.level)
            .map(|l| Estimate::from(l.undone())),
        summary: done.map_or_else(
            || {
                let made = start.made.describe(
                    &crate::hunt::shorts(&start.culprits()),
                    crate::hunt::short(bad),
                );
                if state.end.is_some() {
                    format!("{made}; the hunt ended before it was measured (classify.revert off)")
                } else {
                    made
                }
            },
            |r| r.summary.clone(),
        ),
    })
}
