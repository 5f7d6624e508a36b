//! The report model: what every format shows, derived from the journal's [`HuntState`] and
//! commit metadata by [`Report::build`]. Serialised, it is the JSON report.

use super::commits::{Commits, Diffstat};
use super::confidence::confidence;
use super::context::Context;
use super::markdown::{bisect_log, subject};
use super::phases::{revert_report, ForecastReport, PrunedCommit, PrunedReport, RevertReport};
use super::regression::{regression, series_name_unit, series_of, snapshot_diff};
use super::SCHEMA;
use crate::config::Direction;
use crate::hunt::HuntState;
use crate::journal::{BootOutcome, BuildOutcome, HuntEnd, HuntIdentity};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// A report's data: what every format shows. Serialised, it is the JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The hunt's name.
    pub name: String,
    /// The hunt file.
    pub hunt_file: PathBuf,
    /// The workload file.
    pub workload_file: PathBuf,
    /// A metric command hunt's command: each boot of this report is one run of it, in a
    /// checkout of the commit built once. Absent for kernel hunts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Set for `firstbad reproduce`: the two kernels compared as booted, and the workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reproduction: Option<Reproduction>,
    /// The metric commits are judged by.
    pub metric: String,
    /// `lower-is-better` or `higher-is-better`.
    pub direction: &'static str,
    /// The good endpoint.
    pub good: CommitRef,
    /// The bad endpoint.
    pub bad: CommitRef,
    /// `found`, `only-skipped-left`, `not-reproduced` or `in-progress`.
    pub status: &'static str,
    /// For `not-reproduced`: the figures; for `in-progress`: the step being taken.
    pub status_detail: Option<String>,
    /// The first bad commit, when found.
    pub first_bad: Option<Culprit>,
    /// For `only-skipped-left`: the commits one of which is the first bad.
    pub possible_first_bad: Vec<CommitRef>,
    /// How sure the answer is, and why.
    pub confidence: Confidence,
    /// The baselines' summary as the classifier wrote it.
    pub baselines: Option<String>,
    /// What regressed and by how much: the raw samples of the good and bad endpoints.
    pub regression: Option<Regression>,
    /// How many sub-samples a run kept of how many it gave, when a run gave more than it
    /// keeps; absent when every sample was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples_kept: Option<super::SamplesKept>,
    /// Every commit with a build or a boot: the endpoints first, then in verdict order.
    pub commits: Vec<CommitReport>,
    /// Settings of the test host that differ between good and bad boots (empty when the
    /// results carry no system snapshot).
    pub snapshot_diff: Vec<SettingDiff>,
    /// Commits of the range that change no file the kernel is built from, never built or
    /// booted (issue 35); absent when the hunt did not prune.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pruned: Option<PrunedReport>,
    /// The culprit reverted on top of bad, and what that recovers of the regression (issue 34);
    /// absent when the hunt made no revert.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revert: Option<RevertReport>,
    /// The forecast made once the baselines were in, beside what the hunt then spent;
    /// absent when the hunt made none (reproductions, later steps, older journals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forecast: Option<ForecastReport>,
    /// `git bisect log`, which `git bisect replay` accepts.
    pub bisect_log: String,
    /// Every metric of the workload, the culprit's parent against the culprit, once the
    /// re-test has booted both (issue 34).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric_table: Option<super::metrics::MetricTable>,
    /// `Reported-by:`, `Bisected-by:` and `Closes:` trailers from the hunt file.
    pub trailers: Vec<String>,
    /// The workload file's settings as `key=value` (`writers=1`), for the e-mail's opening;
    /// the JSON has the file's path.
    #[serde(skip)]
    pub workload_parameters: Vec<String>,
}

/// A commit named in a report.
#[derive(Debug, Clone, Serialize)]
pub struct CommitRef {
    /// Full id.
    pub id: String,
    /// First line of the message (`(unknown commit)` when the repository is not at hand).
    pub subject: String,
}

/// The first bad commit with what a developer needs to look at it.
#[derive(Debug, Clone, Serialize)]
pub struct Culprit {
    /// Full id.
    pub id: String,
    /// Subject.
    pub subject: String,
    /// `Name <email>`.
    pub author: Option<String>,
    /// Author date, `git log --date=iso`.
    pub date: Option<String>,
    /// `git log --oneline` (12-digit id and subject).
    pub oneline: String,
    /// Files changed.
    pub diffstat: Option<Diffstat>,
    /// The `[report] web_link` with the id filled in.
    pub link: Option<String>,
}

/// How sure the answer is.
#[derive(Debug, Clone, Serialize)]
pub struct Confidence {
    /// `high`, `medium` or `low`.
    pub level: &'static str,
    /// Share of (good boot, bad boot) pairs in which the bad boot is worse (1.0: the
    /// endpoints separate completely).
    pub baseline_separation: Option<f64>,
    /// Posterior probability that the named commit is the culprit, from every boot of the
    /// hunt (null when not found, or in absolute-threshold mode, which has no model).
    pub probability: Option<f64>,
    /// Whether the final re-test of the culprit against its parent bore it out (null when it
    /// was not run).
    pub confirmed: Option<bool>,
    /// The culprit's share of the whole regression (0 to 1 of the way from good to bad, the
    /// step from its parent to it), with its interval, from the final re-test's rounds; null
    /// without a re-test beside measured endpoints.
    pub culprit_share: Option<Estimate>,
    /// [`Confidence::culprit_share`] in the metric's own unit: the step's part of the metric's
    /// change from good to bad (the statistics read levels on the log scale, where a step
    /// that multiplies the metric by 7 of a regression of 20 is two thirds of the way but a
    /// third of the milliseconds); null without the re-test's levels or the regression's
    /// ratio (journals before it was kept).
    pub culprit_share_in_metric: Option<Estimate>,
    /// Where the rest of the regression lies, when the re-test puts part of it outside the
    /// step from the parent to the culprit (`before` the parent, `after` the culprit); null
    /// without a re-test beside measured endpoints.
    pub rest: Option<RestOfRegression>,
    /// Good and bad verdicts given.
    pub decided_verdicts: usize,
    /// Skipped commits.
    pub skipped: usize,
    /// The reasons, for a person.
    pub reasons: Vec<String>,
}

/// Where a culprit's re-test puts the rest of the regression.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RestOfRegression {
    /// Part of the regression lies before the culprit's parent (its level is clearly above
    /// good, by the smallest effect that counts).
    pub before: bool,
    /// Part of it lies after the culprit (its level is clearly short of bad).
    pub after: bool,
}

/// One endpoint's figures in [`Regression`].
#[derive(Debug, Clone, Serialize)]
pub struct EndpointStats {
    /// Boots measured.
    pub boots: usize,
    /// Samples pooled over those boots.
    pub samples: usize,
    /// Median of the pooled samples, with its interval.
    pub median: Estimate,
    /// 99th percentile of the pooled samples, with its interval.
    pub p99: Estimate,
}

/// A statistic with a confidence interval.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Estimate {
    /// The value from all the data.
    pub value: f64,
    /// Lower end of the interval.
    pub low: f64,
    /// Upper end of the interval.
    pub high: f64,
}

impl From<crate::posterior::Level> for Estimate {
    /// A level between good and bad (a share of the regression) with its interval.
    fn from(l: crate::posterior::Level) -> Estimate {
        Estimate {
            value: l.level,
            low: l.lo,
            high: l.hi,
        }
    }
}

/// What regressed and by how much.
#[derive(Debug, Clone, Serialize)]
pub struct Regression {
    /// The sample series compared (`fsync_latency`), or the metric when results carry no
    /// series.
    pub series: String,
    /// Its unit (`ms`).
    pub unit: String,
    /// The good endpoint.
    pub good: EndpointStats,
    /// The bad endpoint.
    pub bad: EndpointStats,
    /// bad / good of the medians, with its interval.
    pub median_ratio: Estimate,
    /// bad / good of the p99s, with its interval.
    pub p99_ratio: Estimate,
    /// How the intervals were made.
    pub interval_method: String,
}

/// One commit's build, boots and verdict.
#[derive(Debug, Clone, Serialize)]
pub struct CommitReport {
    /// Full id.
    pub id: String,
    /// Subject.
    pub subject: String,
    /// `good-endpoint`, `bad-endpoint` or `tested`.
    pub role: &'static str,
    /// Position in the bisection (1 = first tested commit); none for endpoints.
    pub step: Option<usize>,
    /// `good`, `bad`, `skip`; none for endpoints and commits still being tested.
    pub verdict: Option<&'static str>,
    /// Why the verdict.
    pub reason: Option<String>,
    /// `built`, `failed` or none when not built yet.
    pub build: Option<&'static str>,
    /// Compiler error lines of a failed build.
    pub build_errors: Vec<String>,
    /// Every boot, in order.
    pub boots: Vec<BootReport>,
}

/// One boot of a commit.
#[derive(Debug, Clone, Serialize)]
pub struct BootReport {
    /// Boot number, from 1.
    pub boot: u32,
    /// The test host.
    pub host: String,
    /// `measured` or `failed`.
    pub status: &'static str,
    /// The hunt's metric for this boot.
    pub value: Option<f64>,
    /// Why it failed.
    pub reason: Option<String>,
    /// Every sample of the compared series, in order.
    pub samples: Vec<f64>,
    /// The system snapshot flattened to `setting -> value` (empty when absent).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub snapshot: BTreeMap<String, String>,
    /// vmstat columns (`bi`, `bo`, `wa`, ...) sampled each second (empty when absent).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub vmstat: BTreeMap<String, Vec<f64>>,
}

/// What a reproduction compared: the kernels as they booted, and the workload they ran, for a
/// maintainer to rerun it.
#[derive(Debug, Clone, Serialize)]
pub struct Reproduction {
    /// `uname -r` of the good kernel's measured boots.
    pub good_release: Option<String>,
    /// `uname -r` of the bad kernel's measured boots.
    pub bad_release: Option<String>,
    /// The workload file's text.
    pub workload: Option<String>,
}

/// A test-host setting that differs between good and bad boots.
#[derive(Debug, Clone, Serialize)]
pub struct SettingDiff {
    /// The setting (`sysctls.vm.dirty_ratio`, `devices[0].scheduler`).
    pub setting: String,
    /// Value(s) on good boots.
    pub good: Vec<String>,
    /// Value(s) on bad boots.
    pub bad: Vec<String>,
}

/// A commit's id and subject.
/// The release `commit`'s measured boots reported.
fn release_of(state: &HuntState, commit: &str) -> Option<String> {
    state
        .boots
        .get(commit)?
        .iter()
        .find_map(|b| match &b.outcome {
            crate::journal::BootOutcome::Measured { kernel_release, .. } => {
                Some(kernel_release.clone())
            }
            _ => None,
        })
}

fn commit_ref(commits: &dyn Commits, id: &str) -> CommitRef {
    CommitRef {
        id: id.to_owned(),
        subject: subject(commits, id),
    }
}

/// Flattens a JSON value into `path -> value` strings.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, v, out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), v, out);
            }
        }
        serde_json::Value::Null => {}
        serde_json::Value::String(s) => {
            out.insert(prefix.to_owned(), s.clone());
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

/// The optional system snapshot and vmstat series of a result, read from its JSON form so
/// that results from agents without them (or with more fields) read the same.
fn optional_data(
    result: &firstbad_wire::WorkloadResult,
) -> (BTreeMap<String, String>, BTreeMap<String, Vec<f64>>) {
    let v = serde_json::to_value(result).unwrap_or_default();
    let mut snapshot = BTreeMap::new();
    if let Some(s) = v.get("system").or_else(|| v.get("snapshot")) {
        flatten("", s, &mut snapshot);
    }
    let mut vmstat: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    if let Some(rows) = v.get("vmstat").and_then(|r| r.as_array()) {
        for row in rows {
            if let Some(m) = row.as_object() {
                for (k, x) in m {
                    if let Some(x) = x.as_f64() {
                        vmstat.entry(k.clone()).or_default().push(x);
                    }
                }
            }
        }
    }
    (snapshot, vmstat)
}

/// One commit's build, boots and verdict from the journal, in the given role.
fn commit_report(
    ctx: &Context,
    state: &HuntState,
    commits: &dyn Commits,
    id: &str,
    role: &'static str,
) -> CommitReport {
    let (build, build_errors) = match state.builds.get(id) {
        Some(BuildOutcome::Built { .. }) => (Some("built"), vec![]),
        Some(BuildOutcome::Failed { error_lines, .. }) => (Some("failed"), error_lines.clone()),
        None => (None, vec![]),
    };
    let verdict = state.verdicts.iter().position(|(c, _, _)| c == id);
    let boots = state
        .boots
        .get(id)
        .map(|boots| {
            boots
                .iter()
                .map(|b| match &b.outcome {
                    BootOutcome::Measured { value, result, .. } => {
                        let (snapshot, vmstat) = optional_data(result);
                        BootReport {
                            boot: b.boot,
                            host: b.host.clone(),
                            status: "measured",
                            value: Some(*value),
                            reason: None,
                            samples: series_of(result, ctx.metric)
                                .map(|(_, s)| s.samples.clone())
                                .unwrap_or_default(),
                            snapshot,
                            vmstat,
                        }
                    }
                    BootOutcome::Failed { reason, .. } => BootReport {
                        boot: b.boot,
                        host: b.host.clone(),
                        status: "failed",
                        value: None,
                        reason: Some(reason.clone()),
                        samples: vec![],
                        snapshot: BTreeMap::new(),
                        vmstat: BTreeMap::new(),
                    },
                })
                .collect()
        })
        .unwrap_or_default();
    CommitReport {
        id: id.to_owned(),
        subject: subject(commits, id),
        role,
        step: verdict.filter(|_| role == "tested").map(|i| i + 1),
        verdict: verdict.map(|i| state.verdicts[i].1.as_str()),
        reason: verdict.map(|i| state.verdicts[i].2.clone()),
        build,
        build_errors,
        boots,
    }
}

impl Report {
    /// Derives the report from the journal's state and commit metadata.
    pub fn build(
        ctx: &Context,
        id: &HuntIdentity,
        state: &HuntState,
        commits: &dyn Commits,
    ) -> Report {
        let good = commit_report(ctx, state, commits, &id.good, "good-endpoint");
        let bad = commit_report(ctx, state, commits, &id.bad, "bad-endpoint");
        let mut list = vec![good.clone(), bad.clone()];
        let mut seen: HashSet<&str> = [id.good.as_str(), id.bad.as_str()].into();
        let revert = revert_report(state, &id.bad);
        if let Some(r) = revert.as_ref().and_then(|r| r.revert.as_deref()) {
            list.push(commit_report(ctx, state, commits, r, "revert-on-top"));
            seen.insert(r);
        }
        for (c, _, _) in &state.verdicts {
            if seen.insert(c) {
                list.push(commit_report(ctx, state, commits, c, "tested"));
            }
        }
        // A commit being tested: built or booted, no verdict yet.
        let mut pending: Vec<&String> = state
            .builds
            .keys()
            .chain(state.boots.keys())
            .filter(|c| !seen.contains(c.as_str()))
            .collect();
        pending.sort();
        pending.dedup();
        for c in pending {
            list.push(commit_report(ctx, state, commits, c, "tested"));
        }
        let (status, status_detail) = match &state.end {
            Some(HuntEnd::Found { .. }) => ("found", None),
            Some(HuntEnd::OnlySkippedLeft { .. }) => ("only-skipped-left", None),
            Some(HuntEnd::NotReproduced { message }) => ("not-reproduced", Some(message.clone())),
            Some(HuntEnd::Reproduced { summary }) => ("reproduced", Some(summary.clone())),
            Some(HuntEnd::Measured { summary }) => ("measured", Some(summary.clone())),
            None => ("in-progress", state.in_flight()),
        };
        let first_bad = match &state.end {
            Some(HuntEnd::Found { commit }) => {
                let info = commits.info(commit);
                let subject = subject(commits, commit);
                Some(Culprit {
                    id: commit.clone(),
                    oneline: format!("{} {subject}", crate::hunt::short(commit)),
                    subject,
                    author: info.as_ref().map(|i| i.author.clone()),
                    date: info.as_ref().map(|i| i.date.clone()),
                    diffstat: commits.diffstat(commit),
                    link: ctx
                        .settings
                        .web_link
                        .as_ref()
                        .map(|l| l.replace("{commit}", commit)),
                })
            }
            _ => None,
        };
        let possible_first_bad = match &state.end {
            Some(HuntEnd::OnlySkippedLeft { commits: c }) => {
                c.iter().map(|c| commit_ref(commits, c)).collect()
            }
            _ => vec![],
        };
        let mut trailers = Vec::new();
        if let Some(r) = &ctx.settings.reported_by {
            trailers.push(format!("Reported-by: {r}"));
        }
        if let Some(b) = &ctx.settings.bisected_by {
            trailers.push(format!("Bisected-by: {b}"));
        }
        if let Some(c) = &ctx.settings.closes {
            trailers.push(format!("Closes: {c}"));
        }
        // Read once: the reproduction carries its text, the e-mail its settings.
        // A regular file of a hunt file's size at most: a FIFO would hang the report.
        let workload = crate::files::open_regular(ctx.workload_file)
            .and_then(|f| crate::files::read_capped(f, crate::config::MAX_FILE_BYTES as u64))
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        let workload_parameters = workload
            .iter()
            .flat_map(|text| text.lines())
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| format!("{}={}", k.trim(), v.trim().trim_matches('"')))
            .collect();
        let metric_table = first_bad.as_ref().and_then(|c| {
            super::metrics::table(
                state,
                [
                    commit_ref(commits, state.retested_parent(&c.id)?),
                    commit_ref(commits, &c.id),
                ],
                revert
                    .as_ref()
                    .filter(|r| r.culprit == c.id)
                    .and_then(|r| r.revert.as_deref())
                    .map(|r| commit_ref(commits, r)),
                ctx.metric,
                ctx.classify.min_effect,
            )
        });
        Report {
            schema: SCHEMA,
            name: ctx.name.to_owned(),
            // `configs/../workloads/x.toml` reads better as the file it is.
            hunt_file: std::fs::canonicalize(ctx.hunt_file).unwrap_or(ctx.hunt_file.to_owned()),
            workload_file: std::fs::canonicalize(ctx.workload_file)
                .unwrap_or(ctx.workload_file.to_owned()),
            command: ctx.command.map(str::to_owned),
            reproduction: ctx.reproduction.then(|| Reproduction {
                good_release: release_of(state, &id.good),
                bad_release: release_of(state, &id.bad),
                workload: workload.clone(),
            }),
            metric: ctx.metric.to_owned(),
            direction: match ctx.direction {
                Direction::LowerIsBetter => "lower-is-better",
                Direction::HigherIsBetter => "higher-is-better",
            },
            good: commit_ref(commits, &id.good),
            bad: commit_ref(commits, &id.bad),
            status,
            status_detail,
            first_bad,
            possible_first_bad,
            confidence: confidence(state, &good, &bad, ctx),
            baselines: state.baselines.clone(),
            regression: regression(&good, &bad, ctx.metric, series_name_unit(state, ctx.metric)),
            samples_kept: super::samples_kept(state, ctx.metric),
            snapshot_diff: snapshot_diff(&good, &bad),
            commits: list,
            pruned: state.pruned.as_ref().map(|p| PrunedReport {
                inputs: p.inputs,
                seconds: p.seconds,
                note: p.note.clone(),
                commits: p
                    .commits(&id.bad)
                    .map(|l| PrunedCommit {
                        commit: commit_ref(commits, &l.commit),
                        reason: l.reason.clone(),
                    })
                    .collect(),
            }),
            revert,
            forecast: state.forecast.clone().map(|forecast| ForecastReport {
                forecast,
                spent_boots: state.boots_since_forecast(),
            }),
            bisect_log: bisect_log(id, state, commits),
            metric_table,
            trailers,
            workload_parameters,
        }
    }

    /// The JSON report (pretty-printed).
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("reports serialise")
    }
}
