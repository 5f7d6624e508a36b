//! A regression's hunt report, rendered by the report code every hunt uses: the email text
//! for the culprit mail, the HTML page the dashboard links to, the JSON for the webhook.

use super::WatchError;
use crate::config::HuntFile;
use crate::hunt::{journal_path, HuntState};
use crate::journal::Journal;
use crate::report::{self, Commits};
use std::path::PathBuf;

/// A hunt's reports.
pub struct HuntReports {
    /// The plain-text email report (LKML style, with trailers).
    pub email: String,
    /// The JSON report (docs/report-schema.md).
    pub json: serde_json::Value,
    /// The HTML report, written beside the hunt's journal.
    pub html: PathBuf,
}

/// Renders the reports of the hunt in the hunt file's state directory, writing its HTML page
/// there; `None` when it has no journal yet.
pub fn hunt_reports(file: &HuntFile) -> Result<Option<HuntReports>, WatchError> {
    let Some(ctx) = report::Context::of(file, false) else {
        return Ok(None);
    };
    let path = journal_path(file.state_dir());
    if !path.exists() {
        return Ok(None);
    }
    let j = Journal::open_read_only(&path)?;
    let Some(id) = j.identity()? else {
        return Ok(None);
    };
    let state = HuntState::replay(&j.events()?);
    let commits = report::GitCommits::open(file.repo());
    let built = report::Report::build(&ctx, &id, &state, &commits);
    let range = commits.range(&id.good, &id.bad);
    let html = file.state_dir().join("report.html");
    std::fs::write(&html, report::html::html(&built, range.as_deref()))
        .map_err(|e| WatchError::BadInput(format!("writing {}: {e}", html.display())))?;
    let json = serde_json::from_str(&built.json()).unwrap_or(serde_json::Value::Null);
    Ok(Some(HuntReports {
        email: report::email::email(&built),
        json,
        html,
    }))
}
