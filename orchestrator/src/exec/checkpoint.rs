//! What a host writes to the journal about a boot while the boot runs, before it acts: a
//! write-ahead record of the host's own ([`Checkpoint`]), opaque to the executor. A farm
//! journals the token it puts in a job before it submits the job, and the farm's id of the job
//! after; a resumed hunt hands the boot's last checkpoint back to the host
//! ([`CheckpointLink::resume`]), which takes the boot up again from it instead of doing it
//! twice. Checkpoints of boots the resumed hunt no longer needs go to the host's
//! [`TestHost::left_over`](super::TestHost::left_over) at the end.

use crate::error::HostError;
use crate::hunt::prelude::record;
use crate::hunt::{HuntError, HuntState};
pub use crate::journal::Checkpoint;
use crate::journal::{Event, Recorder};

/// A checkpoint to journal; `done` is answered once it is on disk (or the journal failed:
/// then the sender is dropped and the boot does not go on).
#[derive(Debug)]
pub struct CheckpointNote {
    /// The commit.
    pub commit: String,
    /// Its boot number.
    pub boot: u32,
    /// The checkpoint.
    pub checkpoint: Checkpoint,
    /// Answered when journalled.
    pub done: tokio::sync::oneshot::Sender<()>,
}

/// A boot's way to the journal while it runs, and the checkpoint an earlier run journalled
/// for the same boot (same commit, same boot number).
#[derive(Debug, Clone, Default)]
pub struct CheckpointLink {
    /// The last checkpoint an earlier run journalled for this boot.
    pub resume: Option<Checkpoint>,
    notes: Option<tokio::sync::mpsc::UnboundedSender<CheckpointNote>>,
}

impl CheckpointLink {
    /// A link whose checkpoints go to `notes`, resuming `resume`.
    pub fn new(
        notes: tokio::sync::mpsc::UnboundedSender<CheckpointNote>,
        resume: Option<Checkpoint>,
    ) -> CheckpointLink {
        CheckpointLink {
            resume,
            notes: Some(notes),
        }
    }

    /// Journals `data` as `host`'s checkpoint of boot `boot` of `commit`, and waits until it
    /// is on disk: what the host does next may then be taken up again by a resumed hunt.
    pub async fn write(
        &self,
        commit: &str,
        boot: u32,
        host: &str,
        data: serde_json::Value,
    ) -> Result<(), HostError> {
        let failed =
            || HostError::Missing("the journal refused a host checkpoint: the hunt stops".into());
        let notes = self.notes.as_ref().ok_or_else(|| {
            HostError::Missing("a host checkpoint needs the journal: a bug in firstbad".into())
        })?;
        let (done, written) = tokio::sync::oneshot::channel();
        let note = CheckpointNote {
            commit: commit.to_owned(),
            boot,
            checkpoint: Checkpoint {
                host: host.to_owned(),
                data,
            },
            done,
        };
        notes.send(note).map_err(|_| failed())?;
        written.await.map_err(|_| failed())
    }
}

/// Journals a boot's checkpoint, then tells the boot it may go on.
pub fn record_checkpoint<R: Recorder>(
    journal: &R,
    state: &mut HuntState,
    note: CheckpointNote,
) -> Result<(), HuntError> {
    record(
        journal,
        state,
        Event::HostCheckpoint {
            commit: note.commit,
            boot: note.boot,
            host: note.checkpoint.host,
            data: note.checkpoint.data,
        },
    )?;
    let _ = note.done.send(());
    Ok(())
}
