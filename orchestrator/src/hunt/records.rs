//! What the journal records of a hunt's boots, drift checks, re-test and revert, as the
//! [`super::HuntState`] fold keeps them.

use crate::journal::BootOutcome;

/// One finished boot as the journal has it.
#[derive(Debug, Clone)]
pub struct BootRecord {
    /// Boot number of the commit, from 1.
    pub boot: u32,
    /// Place among all of the hunt's finished boots, from 0 (the journal's order).
    pub seq: usize,
    /// Place among all of the hunt's started boots, from 0: which phase asked for it.
    pub started: usize,
    /// The host.
    pub host: String,
    /// How it ended.
    pub outcome: BootOutcome,
    /// How busy the machine of a local host was during it ([`Event::BootPressure`]).
    ///
    /// [`Event::BootPressure`]: crate::journal::Event::BootPressure
    pub pressure: Option<crate::journal::HostPressure>,
}

/// One drift check of the good endpoint.
#[derive(Debug, Clone)]
pub struct DriftRecord {
    /// Verdicts given before it.
    pub after_verdicts: usize,
    /// In the posterior phase, the boots that phase had spent before it.
    pub in_refine_after: Option<usize>,
    /// Whether the host had drifted.
    pub drifted: bool,
    /// The figures, for a person.
    pub summary: String,
}

/// Where the final re-test of a culprit against its parent began.
#[derive(Debug, Clone)]
pub struct ConfirmStart {
    /// The culprit.
    pub commit: String,
    /// Its first parent.
    pub parent: String,
    /// Measured boots of the culprit before the re-test.
    pub commit_before: usize,
    /// Measured boots of the parent before the re-test.
    pub parent_before: usize,
    /// Boots started before the re-test: those started from here on are the re-test's.
    pub started_before: usize,
}

/// The final re-test's result, as journalled.
#[derive(Debug, Clone)]
pub struct Confirmation {
    /// The culprit.
    pub commit: String,
    /// Posterior probability of the culprit (absent without a model).
    pub confidence: Option<f64>,
    /// Whether the culprit is borne out.
    pub confirmed: bool,
    /// The figures.
    pub summary: String,
    /// Its first parent (empty when it has none).
    pub parent: String,
    /// Where the parent and the culprit sit between good and bad, when the re-test read it.
    pub levels: Option<crate::posterior::StepLevels>,
}

/// Where the revert of a confirmed culprit on top of bad began.
#[derive(Debug, Clone)]
pub struct RevertStart {
    /// The culprit.
    pub commit: String,
    /// The culprits reverted with it, in a revert stage of several ([`super::steps::TOGETHER`]).
    pub with: Vec<String>,
    /// What git made of the revert.
    pub made: crate::build::revert::RevertMade,
    /// Boots started before it: those started from here on are its rounds'.
    pub started_before: usize,
}

impl RevertStart {
    /// Every culprit reverted: the first, then those with it.
    pub fn culprits(&self) -> Vec<String> {
        std::iter::once(self.commit.clone())
            .chain(self.with.iter().cloned())
            .collect()
    }
}

/// What the revert of the culprit recovers, as journalled.
#[derive(Debug, Clone)]
pub struct Reverted {
    /// The culprit.
    pub commit: String,
    /// The culprits reverted with it, in a revert stage of several ([`super::steps::TOGETHER`]).
    pub with: Vec<String>,
    /// The revert commit, when one was made.
    pub revert: Option<String>,
    /// Where the revert sits between good (0) and bad (1), when measured.
    pub level: Option<crate::posterior::Level>,
    /// What the rounds say.
    pub recovers: crate::journal::Recovers,
    /// The figures.
    pub summary: String,
}
