//! Reports of a hunt: Markdown for a person, an e-mail for LKML or bugzilla, JSON for CI
//! systems, a self-contained HTML page with SVG plots, and the live `status` view.
//!
//! Everything is derived from the journal ([`HuntState`]) plus commit metadata, so a report
//! can be made at any time, also while the hunt runs. [`Report::build`] computes the one
//! data model ([`Report`]) that the e-mail, JSON and HTML renderers share; the JSON form
//! is that model serialised (schema: `docs/report-schema.md`).

pub mod email;
pub mod html;
pub mod local;
mod markdown;
pub mod stats;
pub mod status;

pub use markdown::{bisect_log, markdown};

use crate::config::{Direction, ReportConfig};
use crate::history::{CommitInfo, History};
use crate::hunt::HuntState;
use crate::journal::{BootOutcome, BuildOutcome, HuntEnd, HuntIdentity, Verdict};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// Version tag of the JSON report; bumped when a field changes meaning or goes away.
pub const SCHEMA: &str = "firstbad-report/2";

/// Commit metadata lookup; unknown commits get their id as subject.
pub trait Commits {
    /// Subject, author and date of a commit.
    fn info(&self, id: &str) -> Option<CommitInfo>;
    /// What the commit changes against its first parent (`git show --stat`).
    fn diffstat(&self, _id: &str) -> Option<Diffstat> {
        None
    }
    /// The commits of `good..bad`, oldest first (bad last), for drawing the bisection path.
    fn range(&self, _good: &str, _bad: &str) -> Option<Vec<String>> {
        None
    }
}

/// Commit metadata from a git repository.
pub struct GitCommits {
    history: Option<History>,
    repo: Option<git2::Repository>,
}

impl GitCommits {
    /// Opens the repository at `path`; a missing repository gives a lookup that knows no
    /// commit (reports still render, with ids only).
    pub fn open(path: &Path) -> GitCommits {
        GitCommits {
            history: History::open(path).ok(),
            repo: git2::Repository::open(path).ok(),
        }
    }
}

impl Commits for GitCommits {
    fn info(&self, id: &str) -> Option<CommitInfo> {
        self.history.as_ref()?.info(id).ok()
    }

    fn range(&self, good: &str, bad: &str) -> Option<Vec<String>> {
        let repo = self.repo.as_ref()?;
        let mut walk = repo.revwalk().ok()?;
        walk.push(git2::Oid::from_str(bad).ok()?).ok()?;
        walk.hide(git2::Oid::from_str(good).ok()?).ok()?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
            .ok()?;
        walk.map(|o| o.ok().map(|o| o.to_string())).collect()
    }

    fn diffstat(&self, id: &str) -> Option<Diffstat> {
        let repo = self.repo.as_ref()?;
        let commit = repo.find_commit(git2::Oid::from_str(id).ok()?).ok()?;
        let tree = commit.tree().ok()?;
        let parent_tree = commit.parent(0).ok().and_then(|p| p.tree().ok());
        let diff = repo
            .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None)
            .ok()?;
        let mut files = Vec::new();
        for i in 0..diff.deltas().len() {
            let Ok(Some(patch)) = git2::Patch::from_diff(&diff, i) else {
                continue;
            };
            let (_, insertions, deletions) = patch.line_stats().ok()?;
            let delta = patch.delta();
            let path = delta
                .new_file()
                .path()
                .or_else(|| delta.old_file().path())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            files.push(FileChange {
                path,
                insertions,
                deletions,
            });
        }
        Some(Diffstat {
            insertions: files.iter().map(|f| f.insertions).sum(),
            deletions: files.iter().map(|f| f.deletions).sum(),
            files,
        })
    }
}

/// What a commit changes: `git show --stat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diffstat {
    /// Changed files.
    pub files: Vec<FileChange>,
    /// Lines added in all files.
    pub insertions: usize,
    /// Lines removed in all files.
    pub deletions: usize,
}

/// One changed file of a [`Diffstat`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// Path in the tree.
    pub path: String,
    /// Lines added.
    pub insertions: usize,
    /// Lines removed.
    pub deletions: usize,
}

/// What a report is made from besides the journal: the hunt file's settings.
pub struct Context<'a> {
    /// The hunt's name.
    pub name: &'a str,
    /// The hunt file (for "how to reproduce").
    pub hunt_file: &'a Path,
    /// The workload file.
    pub workload_file: &'a Path,
    /// The metric commits are judged by.
    pub metric: &'a str,
    /// Which way is worse.
    pub direction: Direction,
    /// Web link and trailers.
    pub settings: &'a ReportConfig,
    /// The statistics' settings (error rates and the confidence target, for the reasons).
    pub classify: &'a crate::config::ClassifyConfig,
}

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
    /// Every commit with a build or a boot: the endpoints first, then in verdict order.
    pub commits: Vec<CommitReport>,
    /// Settings of the test host that differ between good and bad boots (empty when the
    /// results carry no system snapshot).
    pub snapshot_diff: Vec<SettingDiff>,
    /// `git bisect log`, which `git bisect replay` accepts.
    pub bisect_log: String,
    /// `Bisected-by:` and `Reported-by:` trailers from the hunt file.
    pub trailers: Vec<String>,
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
    /// Good and bad verdicts given.
    pub decided_verdicts: usize,
    /// Skipped commits.
    pub skipped: usize,
    /// The reasons, for a person.
    pub reasons: Vec<String>,
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

fn commit_ref(commits: &dyn Commits, id: &str) -> CommitRef {
    CommitRef {
        id: id.to_owned(),
        subject: markdown::subject(commits, id),
    }
}

/// The compared series of a result: the one the metric is named after
/// (`fsync_latency_p50_ms` -> `fsync_latency`), else the first one.
fn series_of<'r>(
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
        subject: markdown::subject(commits, id),
        role,
        step: verdict.filter(|_| role == "tested").map(|i| i + 1),
        verdict: verdict.map(|i| state.verdicts[i].1.as_str()),
        reason: verdict.map(|i| state.verdicts[i].2.clone()),
        build,
        build_errors,
        boots,
    }
}

/// The unit of the compared series (`ms`), from the first measured boot.
fn series_name_unit(state: &HuntState, metric: &str) -> Option<(String, String)> {
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

fn regression(
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

fn snapshot_diff(good: &CommitReport, bad: &CommitReport) -> Vec<SettingDiff> {
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

/// A probability as a percentage without spurious digits: 0.01 → "1%", 0.005 → "0.5%".
fn percent(p: f64) -> String {
    let s = format!("{:.2}", p * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

fn confidence(
    state: &HuntState,
    good: &CommitReport,
    bad: &CommitReport,
    ctx: &Context,
) -> Confidence {
    let worse = |a: f64, b: f64| match ctx.direction {
        Direction::LowerIsBetter => a > b,
        Direction::HigherIsBetter => a < b,
    };
    let gv: Vec<f64> = good.boots.iter().filter_map(|b| b.value).collect();
    let bv: Vec<f64> = bad.boots.iter().filter_map(|b| b.value).collect();
    let separation = (!gv.is_empty() && !bv.is_empty()).then(|| {
        let pairs = gv.iter().flat_map(|g| bv.iter().map(move |b| (*g, *b)));
        pairs.filter(|(g, b)| worse(*b, *g)).count() as f64 / (gv.len() * bv.len()) as f64
    });
    let mut decided = 0;
    let mut skipped = 0;
    for (_, v, _) in &state.verdicts {
        match v {
            Verdict::Skip => skipped += 1,
            Verdict::Good | Verdict::Bad => decided += 1,
        }
    }
    let mut reasons = Vec::new();
    match separation {
        Some(s) if s >= 1.0 => reasons
            .push("every bad-endpoint boot is worse than every good-endpoint boot".to_owned()),
        Some(s) => reasons.push(format!(
            "the endpoints overlap: {:.0}% of (good, bad) boot pairs are ordered",
            s * 100.0
        )),
        None => reasons.push("the endpoints are not measured yet".to_owned()),
    }
    // The rates hold against exact centres; the baselines' estimates make a verdict wrong more
    // often (`firstbad sim`: 2.8–3.6% at alpha = beta = 1%, Δ/σ = 1), which the posterior
    // allows for.
    reasons.push(format!(
        "{decided} verdicts from a sequential test at alpha {} and beta {} against the \
         baselines' centres (the centres' own error is not in these rates; the culprit's \
         probability allows for it)",
        percent(ctx.classify.alpha),
        percent(ctx.classify.beta)
    ));
    if skipped > 0 {
        reasons.push(format!("{skipped} commit(s) skipped"));
    }
    let found = matches!(state.end, Some(HuntEnd::Found { .. }));
    let confirmation = state.confirmation.as_ref().filter(|_| found);
    if let Some(c) = confirmation {
        reasons.push(c.summary.clone());
    }
    for d in &state.drift_checks {
        if d.drifted {
            reasons.push(format!("host drift: {}", d.summary));
        }
    }
    let probability = confirmation.and_then(|c| c.confidence);
    let level = match confirmation {
        _ if !found => "low",
        Some(c) if !c.confirmed => "low",
        Some(_) if probability.is_some_and(|p| p >= ctx.classify.confidence) => "high",
        // Absolute mode: no posterior; the re-test and complete separation must carry it.
        Some(_) if probability.is_none() && separation == Some(1.0) => "high",
        Some(_) => "medium",
        // A journal from before the final re-test existed.
        None if separation.unwrap_or(0.0) >= 0.9 => "medium",
        None => "low",
    };
    if !found {
        reasons.push("no single first bad commit (yet)".to_owned());
    }
    Confidence {
        level,
        baseline_separation: separation,
        probability,
        confirmed: confirmation.map(|c| c.confirmed),
        decided_verdicts: decided,
        skipped,
        reasons,
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
            None => ("in-progress", state.in_flight()),
        };
        let first_bad = match &state.end {
            Some(HuntEnd::Found { commit }) => {
                let info = commits.info(commit);
                let subject = markdown::subject(commits, commit);
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
        Report {
            schema: SCHEMA,
            name: ctx.name.to_owned(),
            // `configs/../workloads/x.toml` reads better as the file it is.
            hunt_file: std::fs::canonicalize(ctx.hunt_file).unwrap_or(ctx.hunt_file.to_owned()),
            workload_file: std::fs::canonicalize(ctx.workload_file)
                .unwrap_or(ctx.workload_file.to_owned()),
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
            snapshot_diff: snapshot_diff(&good, &bad),
            commits: list,
            bisect_log: bisect_log(id, state, commits),
            trailers,
        }
    }

    /// The JSON report (pretty-printed).
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("reports serialise")
    }
}

#[cfg(test)]
mod tests {
    use super::percent;

    #[test]
    fn a_rate_prints_without_spurious_digits() {
        assert_eq!(percent(0.01), "1%");
        assert_eq!(percent(0.05), "5%");
        assert_eq!(percent(0.005), "0.5%");
        assert_eq!(percent(0.0125), "1.25%");
    }
}
