//! The outcomes the journal's events carry: a build's, a boot's, a verdict, what a revert
//! recovers, and how a hunt ended.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a build ended with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum BuildOutcome {
    /// A bootable kernel.
    Built {
        /// `make kernelrelease`, which the booted kernel must report.
        kernel_release: String,
        /// The cached kernel image.
        image: PathBuf,
        /// The build log.
        log: PathBuf,
        /// Wall time of the build in seconds.
        seconds: f64,
        /// The kernel's identity ([`crate::kernel_id`]): two commits with one identity built
        /// one kernel, and a hunt counts the boots of one for both. Absent for kernels it
        /// cannot be known for (prebuilt ones, command hunts' checkouts, older journals).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kernel_id: Option<String>,
    },
    /// The build failed: the commit is skipped.
    Failed {
        /// The build log.
        log: PathBuf,
        /// The lines that say why (compiler errors).
        error_lines: Vec<String>,
    },
}

impl BuildOutcome {
    /// For a failed build, why, as a person reads it after the commit's name: `does not build
    /// (<the first error line>); log: <path>`; none for a built kernel.
    pub fn failure(&self) -> Option<String> {
        match self {
            BuildOutcome::Failed { error_lines, log } => Some(format!(
                "does not build ({}); log: {}",
                error_lines.first().map_or("see the log", String::as_str),
                log.display()
            )),
            BuildOutcome::Built { .. } => None,
        }
    }
}

/// What one boot of a candidate ended with.
// A measured boot carries every sample (tens of KiB) while a failed one carries a line: boxing
// would only add an indirection to the value the hunt reads most, and events are few.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum BootOutcome {
    /// The right kernel booted and the workload finished.
    Measured {
        /// `uname -r` reported by the agent.
        kernel_release: String,
        /// The boot id reported by the agent.
        boot_id: String,
        /// Value of the hunt's metric for this boot.
        value: f64,
        /// The full result (every sample).
        result: firstbad_wire::WorkloadResult,
        /// The serial console log.
        console: PathBuf,
        /// Seconds from qemu start to a healthy agent.
        boot_seconds: f64,
    },
    /// The boot or the workload failed; never a verdict on its own.
    Failed {
        /// Why, for a person (`kernel panic`, `boot timeout after 180 s`, `wrong kernel`).
        reason: String,
        /// The serial console log.
        console: PathBuf,
        /// The candidate says it cannot be tested (a metric hunt's command exited 125, as
        /// `git bisect run` reads it): the commit is skipped at once, not re-run.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        untestable: bool,
    },
}

impl BootOutcome {
    /// Seconds the host spent on a measured boot: the boot and its workload; `None` for a
    /// failed one (its time is not recorded).
    pub fn seconds(&self) -> Option<f64> {
        match self {
            BootOutcome::Measured {
                boot_seconds,
                result,
                ..
            } => Some(boot_seconds + result.duration_s),
            BootOutcome::Failed { .. } => None,
        }
    }
}

/// A classification of one commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Like the good endpoint.
    Good,
    /// Like the bad endpoint.
    Bad,
    /// Cannot be tested or decided (build failure, boot failures, undecided).
    Skip,
}

impl Verdict {
    /// The word `git bisect` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Good => "good",
            Verdict::Bad => "bad",
            Verdict::Skip => "skip",
        }
    }
}

/// What a culprit's revert on top of bad recovers of the regression, by its rounds' level
/// (0 = good, 1 = bad) and the smallest effect that counts (`floor`, a share of the
/// regression), read at the level's interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recovers {
    /// All of it: the revert measures as good, within the floor at the interval's top.
    All,
    /// Some of it and not all: beyond the floor from both good and bad.
    Part,
    /// None of it: the revert measures as bad, within the floor at the interval's bottom.
    Nothing,
    /// The rounds cannot tell (few of them, a small effect against the noise).
    Undecided,
    /// Not measured: the revert does not apply, changes nothing, or does not build.
    NotMeasured,
}

impl Recovers {
    /// The word the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Recovers::All => "all",
            Recovers::Part => "part",
            Recovers::Nothing => "nothing",
            Recovers::Undecided => "undecided",
            Recovers::NotMeasured => "not measured",
        }
    }
}

/// How the hunt ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum HuntEnd {
    /// The first bad commit.
    Found {
        /// Its full id.
        commit: String,
    },
    /// Only skipped commits separate good from bad; the culprit is one of these.
    OnlySkippedLeft {
        /// The possible culprits.
        commits: Vec<String>,
    },
    /// Good and bad did not measure differently enough.
    NotReproduced {
        /// The figures, for a person.
        message: String,
    },
    /// `firstbad reproduce`: good and bad measure differently, as the report said; nothing
    /// between them was bisected.
    Reproduced {
        /// The baselines' figures, for a person.
        summary: String,
    },
    /// `firstbad watch`: one night's head and reference, measured the series' number of boots
    /// each; the series' detector judges them, not the hunt. Also a revert stage's end (the
    /// culprits of several steps reverted together): its `Reverted` holds the result.
    Measured {
        /// The two medians, for a person.
        summary: String,
    },
}

/// What a boot's window saw: the share of its time (0 to 1) in which some task waited for
/// each resource, and the window's length. `None` for a resource the machine does not report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostPressure {
    /// Share of the window with some task waiting for a CPU.
    pub cpu: Option<f64>,
    /// Share of the window with some task waiting for I/O.
    pub io: Option<f64>,
    /// Share of the window with some task waiting for memory.
    pub memory: Option<f64>,
    /// The window's length in seconds (the boot and its workload).
    pub seconds: f64,
}

impl HostPressure {
    /// As a report shows it beside a boot: `cpu 45% io 3%` (memory only when it stalled).
    pub fn brief(&self) -> String {
        let pct = |x: Option<f64>| x.map_or("-".to_owned(), |v| format!("{:.0}%", 100.0 * v));
        let mut s = format!("cpu {} io {}", pct(self.cpu), pct(self.io));
        if self.memory.is_some_and(|m| m >= 0.005) {
            s.push_str(&format!(" mem {}", pct(self.memory)));
        }
        s
    }

    /// The largest share of the three: how busy the machine's neighbours kept it.
    pub fn worst(&self) -> f64 {
        [self.cpu, self.io, self.memory]
            .into_iter()
            .flatten()
            .fold(0.0, f64::max)
    }
}
