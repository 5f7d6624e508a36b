//! Whether a journal is whole: what a hunt checks before it resumes from one.

use super::{Entry, Event, Journal, JournalError};
use rusqlite::{params, OptionalExtension};

impl Journal {
    /// Checks that the journal is whole and returns its events, or `None` when it holds no
    /// hunt (no identity and no event, as a new journal). Whole means: SQLite's
    /// `quick_check` passes, both tables are there, and a journal with an identity starts
    /// with `HuntStarted` at sequence number 1 and has every number after it, up to the
    /// highest SQLite ever gave. What a lost `-wal` file, a dropped table, a cut file or
    /// deleted events leave fails one of these.
    pub fn verify(&self) -> Result<Option<Vec<Entry>>, JournalError> {
        let damaged = |what: String| JournalError::Damaged {
            path: self.path.clone(),
            what,
        };
        let check: String =
            self.sql(self.conn.query_row("PRAGMA quick_check", [], |r| r.get(0)))?;
        if check != "ok" {
            return Err(damaged(format!("SQLite finds it damaged ({check})")));
        }
        for table in ["meta", "events"] {
            let found: i64 = self.sql(self.conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                params![table],
                |r| r.get(0),
            ))?;
            if found == 0 {
                return Err(damaged(format!("its {table} table is missing")));
            }
        }
        let identity = self.identity()?;
        let entries = self.events()?;
        if identity.is_none() && entries.is_empty() {
            return Ok(None);
        }
        check_sequence(identity.is_some(), &entries, self.stage_name().is_empty())
            .map_err(damaged)?;
        // Every stage's numbers together run without a gap: a chained hunt's stages follow
        // one another in the file.
        let mut stmt = self.sql(self.conn.prepare("SELECT seq FROM events ORDER BY seq"))?;
        let all: Vec<i64> = self.sql(
            stmt.query_map([], |r| r.get(0))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>()),
        )?;
        if let Some(w) = all.windows(2).find(|w| w[1] != w[0] + 1) {
            return Err(damaged(format!(
                "events {} to {} are missing",
                w[0] + 1,
                w[1] - 1
            )));
        }
        // The last numbers too: SQLite keeps the highest number it gave (`AUTOINCREMENT`'s
        // sqlite_sequence, written in the same transaction as the event, so a lost -wal or a
        // rolled-back write takes both). A journal whose last events were deleted resumed once
        // before, its next event numbered past them, and was refused the run after (issue 32,
        // finding 9).
        let given = self.highest_given()?;
        let last = all.last().copied().unwrap_or(0);
        if given > last {
            return Err(damaged(if given == last + 1 {
                format!("its last event, {given}, is missing")
            } else {
                format!("its last events, {} to {given}, are missing", last + 1)
            }));
        }
        Ok(Some(entries))
    }

    /// The highest event number SQLite has given in this file (0 when none).
    fn highest_given(&self) -> Result<i64, JournalError> {
        let has_table: i64 = self.sql(self.conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'",
            [],
            |r| r.get(0),
        ))?;
        if has_table == 0 {
            return Ok(0);
        }
        let given: Option<i64> = self.sql(
            self.conn
                .query_row(
                    "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
                    [],
                    |r| r.get(0),
                )
                .optional(),
        )?;
        Ok(given.unwrap_or(0))
    }
}

/// What is missing from a journal's events, given whether it has an identity: the identity,
/// the hunt's first event (`HuntStarted`, sequence number 1) or numbers in the sequence.
///
/// The first stage starts the file (number 1); a later stage of a chained hunt starts where
/// the one before it ended, with its own `HuntStarted`.
fn check_sequence(has_identity: bool, entries: &[Entry], first_stage: bool) -> Result<(), String> {
    if !has_identity {
        return Err(format!(
            "it holds {} events but no hunt identity",
            entries.len()
        ));
    }
    match entries.first() {
        Some(Entry {
            seq,
            event: Event::HuntStarted { .. },
            ..
        }) if *seq == 1 || !first_stage => {}
        Some(e) => {
            return Err(format!(
                "it does not start with the hunt's first event (hunt-started, number 1): its \
                 first event is number {}, {}",
                e.seq,
                kind(&e.event)
            ))
        }
        None => return Err("it has the hunt's identity but none of its events".into()),
    }
    match entries.windows(2).find(|w| w[1].seq != w[0].seq + 1) {
        Some(w) => Err(format!(
            "events {} to {} are missing",
            w[0].seq + 1,
            w[1].seq - 1
        )),
        None => Ok(()),
    }
}

/// An event's kind as the journal stores it (`test-started`).
fn kind(event: &Event) -> String {
    serde_json::to_value(event).expect("events serialise")["event"]
        .as_str()
        .unwrap_or("?")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{HuntIdentity, Verdict};

    fn identity() -> HuntIdentity {
        HuntIdentity {
            good: "a".into(),
            bad: "b".into(),
            fingerprint: "f".into(),
            meaning: [("hunt.bad".to_owned(), "b".to_owned())].into(),
        }
    }

    fn verdict(c: &str) -> Event {
        Event::Verdict {
            commit: c.into(),
            verdict: Verdict::Good,
            reason: "exit 0".into(),
        }
    }

    /// A journal started with three events after `HuntStarted`, and its connection.
    fn started(dir: &std::path::Path) -> Journal {
        let j = Journal::open(&dir.join("journal.sqlite")).unwrap();
        j.start(&identity(), &[Event::HuntStarted { candidates: 7 }])
            .unwrap();
        for c in ["c1", "c2", "c3"] {
            j.append(&verdict(c)).unwrap();
        }
        j
    }

    #[test]
    fn a_new_journal_holds_no_hunt_and_a_started_one_its_events() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(&dir.path().join("journal.sqlite")).unwrap();
        assert_eq!(j.verify().unwrap(), None);
        let j = started(dir.path());
        assert_eq!(j.verify().unwrap().map(|e| e.len()), Some(4));
    }

    // issue 19, finding 6: a dropped events table was recreated empty and the hunt began again.
    #[test]
    fn a_journal_whose_events_table_was_dropped_is_damaged_and_open_does_not_recreate_it() {
        let dir = tempfile::tempdir().unwrap();
        started(dir.path())
            .conn
            .execute_batch("DROP TABLE events")
            .unwrap();
        let j = Journal::open(&dir.path().join("journal.sqlite")).unwrap();
        let e = j.verify().unwrap_err().to_string();
        assert!(e.contains("its events table is missing"), "{e}");
    }

    // issue 19, finding 6: a -wal cut between the identity and the first event resumed a hunt
    // from nothing.
    #[test]
    fn an_identity_without_the_first_event_is_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(&dir.path().join("journal.sqlite")).unwrap();
        j.set_identity(&identity()).unwrap();
        let e = j.verify().unwrap_err().to_string();
        assert!(e.contains("none of its events"), "{e}");
        j.append(&verdict("c1")).unwrap();
        let e = j.verify().unwrap_err().to_string();
        assert!(e.contains("first event is number 1, verdict"), "{e}");
    }

    #[test]
    fn missing_events_are_named_by_number() {
        let dir = tempfile::tempdir().unwrap();
        let j = started(dir.path());
        j.conn
            .execute_batch("DELETE FROM events WHERE seq IN (2, 3)")
            .unwrap();
        let e = j.verify().unwrap_err().to_string();
        assert!(e.contains("events 2 to 3 are missing"), "{e}");
    }

    // Issue 32, finding 9: the last events deleted were not missed until the next event was
    // numbered past them.
    #[test]
    fn the_last_events_deleted_are_named_by_number() {
        let dir = tempfile::tempdir().unwrap();
        let j = started(dir.path());
        j.conn
            .execute_batch("DELETE FROM events WHERE seq = 4")
            .unwrap();
        let e = j.verify().unwrap_err().to_string();
        assert!(e.contains("its last event, 4, is missing"), "{e}");
        j.conn
            .execute_batch("DELETE FROM events WHERE seq = 3")
            .unwrap();
        let e = j.verify().unwrap_err().to_string();
        assert!(e.contains("its last events, 3 to 4, are missing"), "{e}");
    }

    #[test]
    fn events_without_an_identity_are_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let j = started(dir.path());
        j.conn.execute_batch("DELETE FROM meta").unwrap();
        let e = j.verify().unwrap_err().to_string();
        assert!(e.contains("4 events but no hunt identity"), "{e}");
    }

    #[test]
    fn a_file_sqlite_finds_damaged_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.sqlite");
        drop(started(dir.path()));
        // Overwrite the second page (the first table's root) with junk; the header stays.
        let mut bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() >= 8192, "{} bytes", bytes.len());
        bytes[4096..8192].fill(0x5a);
        std::fs::write(&path, bytes).unwrap();
        let e = Journal::open(&path)
            .and_then(|j| j.verify())
            .expect_err("refused")
            .to_string();
        assert!(e.contains("damaged") || e.contains("malformed"), "{e}");
    }
}
