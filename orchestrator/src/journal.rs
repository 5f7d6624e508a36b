//! The hunt journal: an append-only SQLite log of every step, written before the step is
//! taken and again when it ends.
//!
//! The state of a hunt is derived from the journal alone ([`Journal::events`]), so a
//! `kill -9` at any moment loses at most the step that was in flight, and `firstbad run`
//! picks up from there: finished builds are not rebuilt and finished boots not re-measured.
//! SQLite with a rollback journal (`journal_mode=DELETE`) and `synchronous=EXTRA`: an event
//! that [`Journal::append`] returned for is in the journal file itself, so losing the sidecar
//! file (`journal.sqlite-journal`, which exists only while an event is being written) loses
//! nothing that was kept. In WAL mode, which firstbad used before, the events of a run lived in
//! the `-wal` file until a checkpoint: deleting it lost them silently (issue 19, finding 6).
//! [`Journal::verify`] checks that a journal is whole before a hunt resumes from it.

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use std::path::{Path, PathBuf};

mod events;
mod outcomes;
mod verify;

pub use events::*;
pub use outcomes::*;

/// A journal error.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// SQLite failed.
    #[error("journal {}: {source}", path.display())]
    Sqlite {
        /// The journal file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// The journal is not whole: a table, the hunt's first event or some events are missing,
    /// or SQLite finds it damaged. A hunt must not resume from it.
    #[error("journal {}: {what}", path.display())]
    Damaged {
        /// The journal file.
        path: PathBuf,
        /// What is missing or wrong.
        what: String,
    },
    /// The file at the journal's path is not the one this run opened (or there is none): its
    /// state directory was removed, moved or replaced during the run. Nothing more is
    /// written, so nothing goes to a file that another directory now holds.
    #[error(
        "journal {}: no longer the file this run opened: the state directory was removed, \
         moved or replaced during the run, and what the run did from then on is not saved",
        path.display()
    )]
    Moved {
        /// The journal file.
        path: PathBuf,
    },
    /// An event could not be decoded (a journal from a newer firstbad?).
    #[error("journal {}: event {seq} cannot be read: {message}", path.display())]
    Decode {
        /// The journal file.
        path: PathBuf,
        /// The event's sequence number.
        seq: i64,
        /// Why.
        message: String,
    },
}

/// A journal event with its sequence number and time.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Sequence number, from 1.
    pub seq: i64,
    /// Unix time in milliseconds when it was written.
    pub at_ms: i64,
    /// The event.
    pub event: Event,
}

/// Where a hunt's events go before they are acted on: the SQLite [`Journal`] for real hunts,
/// memory for the simulator's.
pub trait Recorder {
    /// Appends an event; when this returns, the event is kept.
    fn record(&self, event: &Event) -> Result<(), JournalError>;
}

impl Recorder for Journal {
    fn record(&self, event: &Event) -> Result<(), JournalError> {
        self.append(event).map(|_| ())
    }
}

/// Events kept in memory, in order (the simulator's journal).
#[derive(Debug, Default)]
pub struct MemoryJournal(pub std::cell::RefCell<Vec<Event>>);

impl Recorder for MemoryJournal {
    fn record(&self, event: &Event) -> Result<(), JournalError> {
        self.0.borrow_mut().push(event.clone());
        Ok(())
    }
}

/// An open journal.
pub struct Journal {
    conn: Connection,
    path: PathBuf,
    /// Device and inode of the file opened, to tell later whether `path` is still that file.
    file: Option<(u64, u64)>,
    /// The stage this handle reads and writes ("" for a hunt's own events; a chained hunt's
    /// later stages have names, see [`Journal::stage`]).
    stage: String,
    /// Whether the events table has the `stage` column (journals from before stages have not;
    /// all their events are the "" stage's).
    staged: bool,
}

/// The device and inode of the file at `path`.
fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map(|m| (m.dev(), m.ino()))
}

/// The tables of a journal, created in a new one.
const SCHEMA: &str = "
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms INTEGER NOT NULL,
        kind TEXT NOT NULL,
        commit_id TEXT,
        body TEXT NOT NULL,
        stage TEXT NOT NULL DEFAULT ''
    );";

/// Whether `conn`'s events table has the `stage` column.
fn has_stage_column(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM pragma_table_info('events') WHERE name = 'stage'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

impl Journal {
    /// Opens (creating if needed) the journal at `path`. The tables are created only in a
    /// journal that has none: a journal that lost one is left as it is, for
    /// [`Journal::verify`] to name what is missing.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let err = |source| JournalError::Sqlite {
            path: path.to_owned(),
            source,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(err)?;
        // EXTRA also syncs the directory when the rollback journal is deleted at the end of a
        // write: without it, a power cut could bring the rollback journal back and undo the
        // last event. Measured here: 1.0 ms an append, against 0.3 ms in WAL mode.
        conn.execute_batch("PRAGMA journal_mode=DELETE; PRAGMA synchronous=EXTRA;")
            .map_err(err)?;
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .map_err(err)?;
        if tables == 0 {
            conn.execute_batch(&format!("BEGIN; {SCHEMA} COMMIT;"))
                .map_err(err)?;
        }
        // A journal from before stages gets the column; its events are the "" stage's.
        let events: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'events'",
                [],
                |r| r.get(0),
            )
            .map_err(err)?;
        if events > 0 && !has_stage_column(&conn).map_err(err)? {
            conn.execute_batch("ALTER TABLE events ADD COLUMN stage TEXT NOT NULL DEFAULT ''")
                .map_err(err)?;
        }
        let staged = has_stage_column(&conn).map_err(err)?;
        Ok(Journal {
            conn,
            path: path.to_owned(),
            file: file_id(path).ok(),
            stage: String::new(),
            staged,
        })
    }

    /// This journal's events of one stage: a chained hunt (prebuilt kernels, then the source
    /// between two of them) keeps each stage's identity and events in one file, every event
    /// marked with its stage. "" is a hunt's own stage, the only one of an unchained hunt.
    pub fn stage(mut self, name: &str) -> Journal {
        self.stage = name.to_owned();
        self
    }

    /// The stage this handle reads and writes.
    pub fn stage_name(&self) -> &str {
        &self.stage
    }

    /// The meta key of this stage's identity.
    fn identity_key(&self) -> String {
        if self.stage.is_empty() {
            "identity".into()
        } else {
            format!("identity:{}", self.stage)
        }
    }

    /// Opens an existing journal read-only (for `status` and `report` beside a running hunt).
    ///
    /// A hunt killed in the middle of an append leaves a hot rollback journal beside the file,
    /// and SQLite will not read past one on a read-only connection (SQLITE_READONLY_ROLLBACK).
    /// Then the file is opened for writing once, which rolls back the append that never
    /// committed (what the next `firstbad run` would do first), and read again.
    pub fn open_read_only(path: &Path) -> Result<Journal, JournalError> {
        let err = |source| JournalError::Sqlite {
            path: path.to_owned(),
            source,
        };
        let open = || -> Result<Connection, rusqlite::Error> {
            let conn =
                Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
            conn.busy_timeout(std::time::Duration::from_secs(10))?;
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
                r.get::<_, i64>(0)
            })?;
            Ok(conn)
        };
        let conn = match open() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK =>
            {
                let rw =
                    Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
                        .map_err(err)?;
                rw.busy_timeout(std::time::Duration::from_secs(10))
                    .map_err(err)?;
                rw.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
                    r.get::<_, i64>(0)
                })
                .map_err(err)?;
                drop(rw);
                open().map_err(err)?
            }
            other => other.map_err(err)?,
        };
        let staged = has_stage_column(&conn).map_err(err)?;
        Ok(Journal {
            conn,
            path: path.to_owned(),
            file: file_id(path).ok(),
            stage: String::new(),
            staged,
        })
    }

    /// The file behind this journal.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks that the file at this journal's path is still the one it opened (same device
    /// and inode); checked before every write, and before a hunt's end is given.
    pub fn still_at_path(&self) -> Result<(), JournalError> {
        match (self.file, file_id(&self.path)) {
            (Some(opened), Ok(now)) if opened != now => Err(self.moved()),
            (Some(_), Err(_)) => Err(self.moved()),
            _ => Ok(()),
        }
    }

    /// The stages a journal holds, in the order they began ("" first when it has events).
    pub fn stages(&self) -> Result<Vec<String>, JournalError> {
        if !self.staged {
            return Ok(vec![String::new()]);
        }
        let mut stmt = self.sql(
            self.conn
                .prepare("SELECT stage FROM events GROUP BY stage ORDER BY min(seq)"),
        )?;
        self.sql(
            stmt.query_map([], |r| r.get::<_, String>(0))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>()),
        )
    }

    fn unstaged(&self) -> JournalError {
        JournalError::Damaged {
            path: self.path.clone(),
            what: format!(
                "it was opened read-only from before stages, and cannot take stage {:?}",
                self.stage
            ),
        }
    }

    fn moved(&self) -> JournalError {
        JournalError::Moved {
            path: self.path.clone(),
        }
    }

    fn sql<T>(&self, r: rusqlite::Result<T>) -> Result<T, JournalError> {
        r.map_err(|source| JournalError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }

    /// The hunt identity, if one was recorded.
    pub fn identity(&self) -> Result<Option<HuntIdentity>, JournalError> {
        let v: Option<String> = self.sql(
            self.conn
                .query_row(
                    "SELECT value FROM meta WHERE key = ?1",
                    params![self.identity_key()],
                    |r| r.get(0),
                )
                .optional(),
        )?;
        v.map(|s| {
            serde_json::from_str(&s).map_err(|e| JournalError::Decode {
                path: self.path.clone(),
                seq: 0,
                message: e.to_string(),
            })
        })
        .transpose()
    }

    /// Records the hunt identity (once).
    pub fn set_identity(&self, id: &HuntIdentity) -> Result<(), JournalError> {
        self.still_at_path()?;
        let body = serde_json::to_string(id).expect("identity serialises");
        self.sql(self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![self.identity_key(), body],
        ))?;
        Ok(())
    }

    /// Starts a hunt's journal: its identity and first events in one write, so that no
    /// journal ever holds an identity without the `HuntStarted` that [`Journal::verify`]
    /// looks for (a kill between two writes would leave one).
    pub fn start(&self, id: &HuntIdentity, first: &[Event]) -> Result<(), JournalError> {
        self.sql(self.conn.execute_batch("BEGIN IMMEDIATE"))?;
        let written = self
            .set_identity(id)
            .and_then(|()| first.iter().try_for_each(|e| self.append(e).map(|_| ())));
        match written {
            Ok(()) => self.sql(self.conn.execute_batch("COMMIT")),
            Err(e) => {
                self.conn.execute_batch("ROLLBACK").ok();
                Err(e)
            }
        }
    }

    /// Appends an event; when this returns, the event is on disk.
    pub fn append(&self, event: &Event) -> Result<i64, JournalError> {
        let kind = serde_json::to_value(event).expect("events serialise")["event"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        let commit = match event {
            Event::BuildStarted { commit }
            | Event::BuildFinished { commit, .. }
            | Event::BootStarted { commit, .. }
            | Event::BootFinished { commit, .. }
            | Event::BootPressure { commit, .. }
            | Event::BootsCarried { commit, .. }
            | Event::FarmJob { commit, .. }
            | Event::HostCheckpoint { commit, .. }
            | Event::TestStarted { commit, .. }
            | Event::TestFinished { commit, .. }
            | Event::TestCancelled { commit, .. }
            | Event::Verdict { commit, .. }
            | Event::ConfirmStarted { commit, .. }
            | Event::Confirmation { commit, .. }
            | Event::RevertStarted { commit, .. }
            | Event::Reverted { commit, .. } => Some(commit.as_str()),
            _ => None,
        };
        self.append_body(&kind, commit, event).map(|(seq, _)| seq)
    }

    /// Appends any serialisable record under `kind` (the series database of `firstbad watch`
    /// keeps its own events in a journal file); when this returns, it is on disk. Returns its
    /// sequence number and the time written (Unix ms).
    pub fn append_body<T: Serialize>(
        &self,
        kind: &str,
        commit: Option<&str>,
        body: &T,
    ) -> Result<(i64, i64), JournalError> {
        self.still_at_path()?;
        let body = serde_json::to_string(body).expect("journal records serialise");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        if !self.staged && !self.stage.is_empty() {
            return Err(self.unstaged());
        }
        if self.staged {
            self.sql(self.conn.execute(
                "INSERT INTO events (at_ms, kind, commit_id, body, stage) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![now, kind, commit, body, self.stage],
            ))?;
        } else {
            self.sql(self.conn.execute(
                "INSERT INTO events (at_ms, kind, commit_id, body) VALUES (?1, ?2, ?3, ?4)",
                params![now, kind, commit, body],
            ))?;
        }
        Ok((self.conn.last_insert_rowid(), now))
    }

    /// Every event, in order.
    pub fn events(&self) -> Result<Vec<Entry>, JournalError> {
        Ok(self
            .bodies()?
            .into_iter()
            .map(|(seq, at_ms, event)| Entry { seq, at_ms, event })
            .collect())
    }

    /// Every record as (sequence number, Unix time in ms, record), in order.
    pub fn bodies<T: serde::de::DeserializeOwned>(
        &self,
    ) -> Result<Vec<(i64, i64, T)>, JournalError> {
        let row = |r: &rusqlite::Row| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
            ))
        };
        let rows = if self.staged {
            let mut stmt = self
                .sql(self.conn.prepare(
                    "SELECT seq, at_ms, body FROM events WHERE stage = ?1 ORDER BY seq",
                ))?;
            self.sql(
                stmt.query_map(params![self.stage], row)
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>()),
            )?
        } else if self.stage.is_empty() {
            let mut stmt = self.sql(
                self.conn
                    .prepare("SELECT seq, at_ms, body FROM events ORDER BY seq"),
            )?;
            self.sql(
                stmt.query_map([], row)
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>()),
            )?
        } else {
            // A journal from before stages, read-only: it has no later stage.
            Vec::new()
        };
        rows.into_iter()
            .map(|(seq, at_ms, body)| {
                let record = serde_json::from_str(&body).map_err(|e| JournalError::Decode {
                    path: self.path.clone(),
                    seq,
                    message: e.to_string(),
                })?;
                Ok((seq, at_ms, record))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(bad: &str) -> HuntIdentity {
        HuntIdentity {
            good: "a".into(),
            bad: bad.into(),
            fingerprint: bad.into(),
            meaning: Default::default(),
        }
    }

    /// Issue 22 item 3: a chained hunt's stages in one file, each with its identity and its
    /// events, every event marked with its stage.
    #[test]
    fn two_stages_of_one_journal_keep_their_own_identity_and_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.sqlite");
        let first = Journal::open(&path).unwrap();
        first
            .start(&identity("k3"), &[Event::HuntStarted { candidates: 3 }])
            .unwrap();
        first
            .append(&Event::RunStarted {
                tuning: Default::default(),
            })
            .unwrap();
        let source = Journal::open(&path).unwrap().stage("source");
        assert_eq!(source.verify().unwrap(), None, "a new stage holds no hunt");
        source
            .start(&identity("c9"), &[Event::HuntStarted { candidates: 9 }])
            .unwrap();
        assert_eq!(first.identity().unwrap().unwrap().bad, "k3");
        assert_eq!(source.identity().unwrap().unwrap().bad, "c9");
        assert_eq!(first.verify().unwrap().unwrap().len(), 2);
        let later = source.verify().unwrap().unwrap();
        assert_eq!(later.len(), 1);
        assert_eq!(later[0].seq, 3, "the stage starts where the first ended");
        assert_eq!(first.stages().unwrap(), ["", "source"]);
        let marks: Vec<String> = first
            .conn
            .prepare("SELECT stage FROM events ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(marks, ["", "", "source"]);
        // A gap between the stages is damage, seen from either.
        first
            .conn
            .execute_batch("DELETE FROM events WHERE seq = 2")
            .unwrap();
        let e = source.verify().unwrap_err().to_string();
        assert!(e.contains("events 2 to 2 are missing"), "{e}");
    }

    #[test]
    fn a_journal_from_before_stages_gets_the_column_and_keeps_its_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.sqlite");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, at_ms INTEGER NOT \
                 NULL, kind TEXT NOT NULL, commit_id TEXT, body TEXT NOT NULL);",
            )
            .unwrap();
            conn.execute(
                "INSERT INTO events (at_ms, kind, body) VALUES (0, 'hunt-started', ?1)",
                params![serde_json::to_string(&Event::HuntStarted { candidates: 2 }).unwrap()],
            )
            .unwrap();
        }
        // Read-only, as `status` reads it: the old layout is read as the one stage.
        let ro = Journal::open_read_only(&path).unwrap();
        assert_eq!(ro.events().unwrap().len(), 1);
        assert!(ro.stage("source").events().unwrap().is_empty());
        let j = Journal::open(&path).unwrap();
        assert!(j.staged);
        assert_eq!(j.events().unwrap().len(), 1);
    }

    #[test]
    fn events_survive_reopen_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("journal.sqlite");
        {
            let j = Journal::open(&p).unwrap();
            j.set_identity(&HuntIdentity {
                good: "a".into(),
                bad: "b".into(),
                fingerprint: "f".into(),
                meaning: Default::default(),
            })
            .unwrap();
            j.append(&Event::BuildStarted {
                commit: "c1".into(),
            })
            .unwrap();
            j.append(&Event::Verdict {
                commit: "c1".into(),
                verdict: Verdict::Skip,
                reason: "build failed".into(),
            })
            .unwrap();
        }
        let j = Journal::open(&p).unwrap();
        assert_eq!(j.identity().unwrap().unwrap().bad, "b");
        let ev = j.events().unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].seq, 1);
        assert!(matches!(
            &ev[1].event,
            Event::Verdict {
                verdict: Verdict::Skip,
                ..
            }
        ));
        let ro = Journal::open_read_only(&p).unwrap();
        assert_eq!(ro.events().unwrap().len(), 2);
    }

    // CI, 2026-12-02: `kill -9` in the middle of an append left a hot rollback journal, and
    // every read-only open (`status`, `report`) failed with "attempt to write a readonly
    // database" until a `firstbad run` rolled it back.
    #[test]
    fn a_hunt_killed_mid_append_can_be_read_without_running_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("journal.sqlite");
        let j = Journal::open(&p).unwrap();
        let id = HuntIdentity {
            good: "a".into(),
            bad: "b".into(),
            fingerprint: "f".into(),
            meaning: Default::default(),
        };
        j.start(&id, &[Event::HuntStarted { candidates: 3 }])
            .unwrap();
        // An append whose rollback journal is synced (its header then holds the magic that
        // makes it hot) and whose pages are partly written: a one-page cache spills them. Copying
        // both files now is what a `kill -9` at that moment leaves, without the lock.
        j.conn
            .execute_batch("PRAGMA cache_size = 1; BEGIN IMMEDIATE;")
            .unwrap();
        for _ in 0..200 {
            j.conn
                .execute(
                    "INSERT INTO events (at_ms, kind, body) VALUES (0, 'x', ?1)",
                    ["y".repeat(3000)],
                )
                .unwrap();
        }
        let killed = dir.path().join("killed");
        std::fs::create_dir(&killed).unwrap();
        std::fs::copy(&p, killed.join("journal.sqlite")).unwrap();
        let hot = dir.path().join("journal.sqlite-journal");
        assert!(hot.exists(), "the append has a rollback journal");
        std::fs::copy(&hot, killed.join("journal.sqlite-journal")).unwrap();
        let ro = Journal::open_read_only(&killed.join("journal.sqlite")).unwrap();
        assert_eq!(
            ro.events().unwrap().len(),
            1,
            "the uncommitted append is gone"
        );
        assert!(!killed.join("journal.sqlite-journal").exists());
        j.conn.execute_batch("ROLLBACK;").unwrap();
    }

    // issue 19, finding 6: in WAL mode the events of a run lived in journal.sqlite-wal until a
    // checkpoint, and a hunt killed with -9 whose -wal was then deleted began again.
    #[test]
    fn every_kept_event_is_in_the_journal_file_itself_while_the_hunt_runs() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("journal.sqlite");
        let j = Journal::open(&p).unwrap();
        let id = HuntIdentity {
            good: "a".into(),
            bad: "b".into(),
            fingerprint: "f".into(),
            meaning: Default::default(),
        };
        j.start(&id, &[Event::HuntStarted { candidates: 3 }])
            .unwrap();
        j.append(&Event::BuildStarted {
            commit: "c1".into(),
        })
        .unwrap();
        // The file alone, as a `kill -9` and a lost sidecar file would leave it.
        let copy = dir.path().join("copy.sqlite");
        std::fs::copy(&p, &copy).unwrap();
        let sidecars: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("journal.sqlite-"))
            .collect();
        assert_eq!(sidecars, Vec::<String>::new(), "between writes");
        let events = Journal::open(&copy).unwrap().verify().unwrap().unwrap();
        assert_eq!(events.len(), 2);
        drop(j);
    }
}
