//! Reports of a hunt: Markdown for a person, an e-mail for LKML or bugzilla, JSON for CI
//! systems, a self-contained HTML page with SVG plots, and the live `status` view.
//!
//! Everything is derived from the journal ([`HuntState`](crate::hunt::HuntState)) plus commit
//! metadata, so a report can be made at any time, also while the hunt runs. [`Report::build`]
//! computes the one data model ([`Report`]) that the e-mail, JSON and HTML renderers share;
//! the JSON form is that model serialised (schema: `docs/report-schema.md`).
//!
//! Files: `model.rs` holds the data model and its building from the journal, with
//! `confidence.rs` (how sure the answer is), `regression.rs` (how the endpoints differ) and
//! `metrics.rs` (every metric of the workload, the culprit's parent against the culprit);
//! `commits.rs` looks up commit metadata; the renderers are `markdown.rs`, `email.rs`,
//! `html.rs` and `status.rs` (the live view), and `local.rs` reports `firstbad local` hunts.
//! `bundle.rs` writes the reproduce bundle (`firstbad report --bundle`).
//! `text.rs` makes text taken from input inert for a terminal, Markdown and a mail.

pub mod bundle;
mod commits;
mod confidence;
mod context;
pub mod email;
pub mod html;
pub mod local;
mod markdown;
pub mod metrics;
mod model;
mod phases;
mod regression;
pub mod stats;
pub mod status;
pub use crate::text;

pub use commits::{Commits, Diffstat, FileChange, GitCommits};
pub use context::Context;
pub use markdown::{bisect_log, markdown};
pub use model::{
    BootReport, CommitRef, CommitReport, Confidence, Culprit, EndpointStats, Estimate, Regression,
    Report, SettingDiff,
};

pub use phases::RevertReport;
pub use regression::{samples_kept, SamplesKept};

/// The revert of a run's culprits together on top of bad (`hunt::steps::TOGETHER`), from its
/// stage's state, `bad` the hunt's bad endpoint; `None` before it began.
pub fn together(state: &crate::hunt::HuntState, bad: &str) -> Option<RevertReport> {
    phases::revert_report(state, bad)
}

/// Version tag of the JSON report; bumped when a field changes meaning or goes away.
pub const SCHEMA: &str = "firstbad-report/2";
