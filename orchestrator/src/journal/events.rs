//! What the journal holds: the hunt's identity and the events, serialised as the journal's
//! rows; the outcomes they carry (builds, boots, verdicts, the end) are in `outcomes.rs`.

use super::outcomes::{BootOutcome, BuildOutcome, HuntEnd, Recovers, Verdict};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The identity of a hunt, stored once; a rerun must match it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HuntIdentity {
    /// Resolved good commit (full hex).
    pub good: String,
    /// Resolved bad commit.
    pub bad: String,
    /// Hash of everything that changes what a measurement means (kernel config, workload,
    /// metric); a rerun with another value must use another state directory.
    pub fingerprint: String,
    /// The same fields one by one (`classify.mode` → `"baselines"`), so that a changed hunt
    /// file is refused with the field, the old and the new value. Empty in journals written
    /// before firstbad recorded them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub meaning: std::collections::BTreeMap<String, String>,
}

/// A host's record of one boot, as journalled ([`Event::HostCheckpoint`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The host that wrote it.
    pub host: String,
    /// What the host needs to take the boot up again; only that host reads it.
    pub data: serde_json::Value,
}

impl Checkpoint {
    /// The host's name for what the boot runs as, when it has one (a farm's job id): for
    /// `firstbad status`.
    pub fn job(&self) -> Option<&str> {
        self.data.get("job").and_then(serde_json::Value::as_str)
    }
}

/// A boot of an earlier stage of the run, carried into a later one ([`Event::BootsCarried`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CarriedBoot {
    /// The stage it was measured in (`""`: the run's first).
    pub stage: String,
    /// Its number there: numbers go on from the highest carried.
    pub boot: u32,
    /// The host.
    pub host: String,
    /// What it measured.
    pub outcome: BootOutcome,
}

/// One journal entry.
#[allow(clippy::large_enum_variant)] // see BootOutcome
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// The hunt started (written once).
    HuntStarted {
        /// Number of candidate commits between good and bad.
        candidates: usize,
    },
    /// A build is about to start.
    BuildStarted {
        /// The commit.
        commit: String,
    },
    /// A build ended.
    BuildFinished {
        /// The commit.
        commit: String,
        /// How.
        outcome: BuildOutcome,
    },
    /// A boot is about to start.
    BootStarted {
        /// The commit.
        commit: String,
        /// Boot number of this commit, from 1.
        boot: u32,
        /// The host.
        host: String,
    },
    /// A boot ended.
    BootFinished {
        /// The commit.
        commit: String,
        /// Boot number of this commit, from 1.
        boot: u32,
        /// The host.
        host: String,
        /// How.
        outcome: BootOutcome,
    },
    /// Boots of `commit` measured in earlier stages of the run, taken into this stage as its
    /// first boots of it (#31): a later step's endpoints are kernels the run has booted
    /// already, so its baselines start from their boots and boot only what their looks still
    /// need. Written once per endpoint, before the stage's first boot; each boot stays counted
    /// where it was measured (it is not a `boot-finished` here).
    BootsCarried {
        /// The commit.
        commit: String,
        /// Its measured boots, in the order they finished.
        boots: Vec<CarriedBoot>,
    },
    /// The endpoints were measured and the regression confirmed.
    BaselinesConfirmed {
        /// For a person.
        summary: String,
        /// Measured boots of each endpoint the model was estimated from (the first this many
        /// of each, in journal order); absent in journals of the first classifier.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        boots: Option<usize>,
    },
    /// What the rest of the hunt should cost and whether it can name the culprit, from the
    /// baselines' model ([`crate::sim::forecast`]); written once, after `BaselinesConfirmed` and
    /// before the first candidate, by hunts that forecast (`firstbad run`, `firstbad plan`).
    Forecast(Forecast),
    /// A run of `firstbad run` began: nothing an earlier run started is still running (its
    /// steps are redone). `tuning` holds the settings that may change between runs (alpha,
    /// beta, boot caps, refinement, confirmation) as this run used them.
    RunStarted {
        /// Setting name → value, as in the hunt file.
        #[serde(default)]
        tuning: std::collections::BTreeMap<String, String>,
    },
    /// A drift check began: the good endpoint's boots started from here on are its
    /// re-measurements.
    DriftCheckStarted,
    /// The good endpoint was booted again to check that the host has not drifted.
    DriftCheck {
        /// Verdicts given when the check was made (checks fall after every N verdicts).
        after_verdicts: usize,
        /// In the posterior phase (no verdicts there), the boots the phase had spent when the
        /// check was made.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        in_refine_after: Option<usize>,
        /// Whether the good endpoint no longer measured like good.
        drifted: bool,
        /// The figures, for a person.
        summary: String,
    },
    /// The final re-test of a culprit against its parent began (interleaved boots of both).
    ConfirmStarted {
        /// The culprit git bisect's rule named.
        commit: String,
        /// Its first parent.
        parent: String,
    },
    /// The final re-test's result and the confidence stated for the culprit.
    Confirmation {
        /// The culprit.
        commit: String,
        /// Its first parent.
        parent: String,
        /// Posterior probability that the culprit is this commit, from every boot of the hunt;
        /// absent where the mode has no model (absolute thresholds).
        confidence: Option<f64>,
        /// Whether the re-test and the posterior bear the culprit out.
        confirmed: bool,
        /// The figures, for a person.
        summary: String,
        /// Where the parent and the culprit sit between good and bad in the re-test's rounds
        /// (baselines mode); absent without such a re-test, and in journals written before it
        /// was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        levels: Option<crate::posterior::StepLevels>,
    },
    /// The confirmed culprit was reverted on top of the stage's bad endpoint (issue 34):
    /// the revert commit to build and boot in rounds beside good and bad, or why there is none.
    RevertStarted {
        /// The culprit.
        commit: String,
        /// The culprits reverted together with it, in a revert stage of a regression of
        /// several steps (`hunt::steps::TOGETHER`); empty for one.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        with: Vec<String>,
        /// The commit it was reverted onto.
        onto: String,
        /// What git made of it.
        made: RevertMade,
    },
    /// What reverting the culprit on top of bad recovers of the regression.
    Reverted {
        /// The culprit.
        commit: String,
        /// The culprits reverted together with it (as in its `RevertStarted`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        with: Vec<String>,
        /// The revert commit, when one was made.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        revert: Option<String>,
        /// Where the revert sits between good (0) and bad (1) in its rounds; what it recovers
        /// is 1 minus this. Absent when it was not measured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        level: Option<crate::posterior::Level>,
        /// What the rounds say of it.
        recovers: Recovers,
        /// The figures, for a person.
        summary: String,
    },
    /// A commit was classified.
    Verdict {
        /// The commit.
        commit: String,
        /// The verdict.
        verdict: Verdict,
        /// Why, for a person.
        reason: String,
    },
    /// The range options and what was done to the user's revisions (written once, after
    /// `HuntStarted`, when a range option is set or something must be said).
    Range(RangeInfo),
    /// Which commits of the range cannot change the kernel under test (issue 35), decided once
    /// from the endpoints' build inputs before the first candidate is chosen; the search
    /// treats them as commits outside `-- <paths>`. Written once per stage of a kernel hunt
    /// over git, pruning or not (then `note` says why not), so that a rerun searches the same
    /// range.
    Pruned(Pruning),
    /// A local command hunt started its command on a commit, in checkout `job` (a `[test]`
    /// hunt; kernel hunts never write it).
    TestStarted {
        /// The commit.
        commit: String,
        /// The checkout (worker) running it, from 0.
        job: u32,
    },
    /// The command of a local command hunt ended on a commit; a `Verdict` follows unless the
    /// run said nothing about the commit (then the hunt stops, see [`crate::local`]).
    TestFinished {
        /// The commit.
        commit: String,
        /// The checkout (worker) that ran it.
        job: u32,
        /// How it ended.
        outcome: TestOutcome,
    },
    /// A run of a command hunt's command is to be killed: other results have ruled its commit
    /// out (or the hunt is stopping). Its `TestFinished` follows, marked cancelled unless it
    /// had ended by itself; no verdict is drawn from a cancelled run.
    TestCancelled {
        /// The commit.
        commit: String,
        /// The checkout running it.
        job: u32,
    },
    /// A host left the hunt's pool after a host error (not the candidate's fault); the
    /// remaining hosts carry on, and a resumed hunt leaves it out until `--restore-host`.
    HostRetired {
        /// The host's name (`[[hosts]] name`).
        host: String,
        /// The error, for a person.
        reason: String,
    },
    /// How busy the machine a local host runs on was during a boot ([`crate::pressure`]):
    /// journalled right after the boot's [`Event::BootFinished`], for the reports and for
    /// reading the boot against its neighbours' load.
    BootPressure {
        /// The commit.
        commit: String,
        /// Its boot number.
        boot: u32,
        /// The host.
        host: String,
        /// The stalled shares of the boot's window.
        pressure: super::HostPressure,
    },
    /// A host's write-ahead record of a boot under way ([`crate::exec::checkpoint`]): a farm
    /// writes one with its token before it submits the job, then one with the id the farm gave
    /// it, so that a resumed hunt takes the boot up again (the last checkpoint goes back to the
    /// host) instead of doing it twice.
    HostCheckpoint {
        /// The commit.
        commit: String,
        /// Its boot number.
        boot: u32,
        /// The host.
        host: String,
        /// What the host needs to take the boot up again (a farm: `token`, `job`).
        data: serde_json::Value,
    },
    /// What a farm journalled before checkpoints were generic (journals of 2026-12-02 to
    /// 2026-12-04): read as the checkpoint `{"token", "job"}` of its host, never written.
    FarmJob {
        /// The commit.
        commit: String,
        /// Its boot number.
        boot: u32,
        /// The host (the farm's name in the hunt file).
        host: String,
        /// firstbad's own token, written into the job's definition.
        token: String,
        /// The farm's id of the job, once submitted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job: Option<String>,
    },
    /// A retired host was put back into the pool by `firstbad run --restore-host`.
    HostRestored {
        /// The host's name.
        host: String,
    },
    /// The hunt ended.
    Finished {
        /// How.
        end: HuntEnd,
    },
}

/// How one run of a local hunt's command ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestOutcome {
    /// The exit status, when the command exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the shell, when it did not exit (not set for a timeout).
    pub signal: Option<i32>,
    /// Killed by firstbad at `[test] timeout_s`.
    pub timed_out: bool,
    /// Killed by firstbad because other results had made the commit irrelevant (no longer a
    /// candidate): no verdict is drawn from it.
    #[serde(default)]
    pub cancelled: bool,
    /// Wall time of the run.
    pub seconds: f64,
    /// The last lines of its standard output and error, interleaved.
    pub output_tail: Vec<String>,
    /// The whole output.
    pub log: PathBuf,
}

/// How a hunt's range was set up beyond one good and one bad revision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeInfo {
    /// The good commits bounding the range (full ids; a merge base stands in for a good on
    /// another branch).
    pub goods: Vec<String>,
    /// `git bisect start -- <paths>`.
    #[serde(default)]
    pub paths: Vec<String>,
    /// `git bisect start --first-parent`.
    #[serde(default)]
    pub first_parent: bool,
    /// What a person must be told (e.g. that a merge base replaced a good revision).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// What a hunt's pruning decided ([`Event::Pruned`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pruning {
    /// Source files the endpoints' builds read (their union), 0 when not pruned.
    pub inputs: usize,
    /// The links along which nothing the kernel is built from changes.
    pub links: Vec<PrunedLink>,
    /// Why the range was not pruned (`--no-prune`, an endpoint that does not build, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Seconds the pruning took (diffs and the inputs read), for the reports.
    #[serde(default)]
    pub seconds: f64,
}

/// A commit that changes nothing its kernel is built from, relative to one of its parents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrunedLink {
    /// The commit.
    pub commit: String,
    /// The parent it is compared with.
    pub parent: String,
    /// That parent's place among the commit's parents, from 0 (the first parent: a merge is
    /// judged by its effect on it).
    #[serde(default)]
    pub nth: usize,
    /// What it touches and why that cannot change the kernel, for a person:
    /// "touches only drivers/scsi/lpfc/lpfc_init.c (not built)".
    pub reason: String,
}

impl Pruning {
    /// The commits pruned against their first parent, with why: what the reports list. The
    /// bad endpoint is left out of it: it may change nothing the kernel is built from (the
    /// search then treats it as git treats a bad commit outside `-- <paths>`), but it is
    /// built and booted as an endpoint.
    pub fn commits<'a>(&'a self, bad: &'a str) -> impl Iterator<Item = &'a PrunedLink> {
        self.links
            .iter()
            .filter(move |l| l.nth == 0 && l.commit != bad)
    }
}

/// What reverting a culprit (or several) on top of a commit gave (`build::revert` makes it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum RevertMade {
    /// It applies: the commit that holds it, whose parent is the commit reverted onto.
    Applied {
        /// The revert commit.
        revert: String,
    },
    /// It does not apply cleanly on top: the files in conflict.
    Conflicts {
        /// Paths, as git names them.
        files: Vec<String>,
    },
    /// It applies and changes nothing: the commit reverted onto no longer has the change.
    Empty,
    /// git could not make it (a missing object, an unreadable repository).
    Failed {
        /// git's words.
        error: String,
    },
}

/// A median and the value nine hunts in ten stay within.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Median.
    pub median: f64,
    /// 90th percentile.
    pub p90: f64,
}

/// The forecast of one hunt (`crate::sim::forecast` makes it), journalled once its baselines are in
/// (`Event::Forecast`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forecast {
    /// Candidates left, the bad endpoint included.
    pub candidates: usize,
    /// The regression, as a share of good (0.25: bad is 25% worse).
    pub effect: f64,
    /// The per-boot spread, as a share (the log-scale σ as a factor, minus one).
    pub spread: f64,
    /// The regression in units of the per-boot spread (Δ/σ on the log scale).
    pub effect_sigmas: f64,
    /// Simulated hunts behind the figures.
    pub hunts: usize,
    /// Share of them that named the culprit (within the budget, when the hunt has one).
    pub right: f64,
    /// Boots after the baselines (failed boots included).
    pub boots: Spread,
    /// Builds after the endpoints'.
    pub builds: Spread,
    /// Hours after the baselines on these hosts, when their boot times are known (builds
    /// counted when theirs are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<Spread>,
    /// The boot (with its workload) and build times the hours are computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_seconds: Option<f64>,
    /// Whether the hunt can be expected to name the culprit ([`crate::sim::forecast::GO_RIGHT`]).
    pub go: bool,
    /// On a no-go, what would make the hunt bisectable, each with its own forecast.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub advice: Vec<String>,
    /// The `[classify]` tuning it was made with (`hunt::tuning`): a rerun with another is
    /// forecast again.
    #[serde(default)]
    pub tuning: std::collections::BTreeMap<String, String>,
}
