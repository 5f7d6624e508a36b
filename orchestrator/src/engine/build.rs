//! A build outside the executor's loop (the endpoints' before pruning, `firstbad try`'s),
//! journalled as the loop journals one.

use crate::hunt::prelude::record;
use crate::hunt::{short, HuntError, HuntState};
use crate::journal::{Event, Recorder};

/// Builds `commit` outside the executor's loop, journalled as the loop journals a build
/// (`BuildStarted`, then `BuildFinished` with the outcome), in a `build` span.
pub async fn build_recorded(
    journal: &impl Recorder,
    state: &mut HuntState,
    builder: &impl crate::exec::Builder,
    commit: &str,
) -> Result<crate::journal::BuildOutcome, HuntError> {
    record(
        journal,
        state,
        Event::BuildStarted {
            commit: commit.to_owned(),
        },
    )?;
    let outcome = tracing::Instrument::instrument(
        builder.build(commit),
        tracing::info_span!("build", commit = short(commit)),
    )
    .await?;
    record(
        journal,
        state,
        Event::BuildFinished {
            commit: commit.to_owned(),
            outcome: outcome.clone(),
        },
    )?;
    Ok(outcome)
}
