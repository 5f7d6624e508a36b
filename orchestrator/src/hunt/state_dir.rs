//! A hunt's state directory: one `firstbad run` at a time; the journal is the hunt, so a
//! directory with a hunt's files but no whole journal is refused rather than hunted again;
//! `--fresh` moves an earlier hunt aside; and a result is given only once it is saved
//! (issue 19, item 5 and finding 6).

use super::{journal_path, HuntError};
use crate::journal::{Entry, Event, HuntEnd, Journal, JournalError};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// What a hunt leaves in its state directory besides the journal: command hunts' output
/// (`logs/`) and checkouts, kernel hunts' serial consoles. The run locks, the hosts' work
/// files (`hosts/`), `firstbad try`'s directory (`try/`) and hunts moved aside by `--fresh`
/// are no hunt's.
const HUNT_FILES: [&str; 3] = ["logs", "checkouts", "consoles"];

/// Names `--fresh` leaves where they are: the run locks, held while it moves the rest.
const LOCKS: [&str; 2] = ["run.lock", "lock"];

/// Holds a state directory for one `firstbad run` at a time (released when the process ends,
/// `kill -9` included), then checks that it holds a whole hunt or none ([`check_state_dir`]).
/// A second run of the same hunt is refused before it reads or writes anything, always with
/// exit 2 and the same message (issue 19, finding 8: one in 13 such tries got "database is
/// locked", exit 1, another found the hunt ended by the first).
pub fn lock_state_dir(state_dir: &Path) -> Result<std::fs::File, HuntError> {
    let lock = hold(state_dir)?;
    check_state_dir(state_dir)?;
    Ok(lock)
}

/// Takes the run lock of a state directory, writing this process's id into it.
fn hold(state_dir: &Path) -> Result<std::fs::File, HuntError> {
    use std::io::Write as _;
    use std::os::unix::io::AsRawFd;
    let path = state_dir.join("run.lock");
    let mut lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| HuntError::BadInput(format!("{}: {e}", path.display())))?;
    // SAFETY: flock(2) on a file descriptor we own.
    let take = || unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    // A lock that this process's last run of the hunt released can still be held for a
    // moment by a child another thread forked while it was open: the copy of the descriptor
    // lives until the child's exec closes it (close-on-exec), longer on a loaded machine.
    // Seen with hunts run one after another beside other threads that spawn git (the
    // library's own tests). A holder that is this process waits for that, briefly; another
    // process is refused at once.
    let mine =
        || std::fs::read_to_string(&path).is_ok_and(|p| p.trim() == std::process::id().to_string());
    let patience = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut held = take();
    while !held && mine() && std::time::Instant::now() < patience {
        std::thread::sleep(std::time::Duration::from_millis(10));
        held = take();
    }
    if !held {
        let holder = std::fs::read_to_string(&path).unwrap_or_default();
        return Err(HuntError::BadInput(format!(
            "another `firstbad run` ({}) is running the hunt in {}: wait for it, or stop it \
             and rerun to resume",
            match holder.trim() {
                "" => "pid unknown".to_owned(),
                pid => format!("pid {pid}"),
            },
            state_dir.display()
        )));
    }
    lock.set_len(0).ok();
    write!(lock, "{}", std::process::id()).ok();
    Ok(lock)
}

/// Refuses (exit 2) a state directory that holds a hunt's files but no whole journal of it:
/// the journal missing or empty, unreadable, with a table or events missing, or holding no
/// hunt beside a hunt's logs, checkouts or consoles (a journal that is whole but lost runs
/// the logs show is refused by [`check_runs_recorded`], once it is known to be this hunt's). Before, each of these started the hunt
/// over without a word (issue 19, finding 6). A new directory, or one with only what
/// `firstbad try` and the locks leave, passes.
pub fn check_state_dir(state_dir: &Path) -> Result<(), HuntError> {
    let path = journal_path(state_dir);
    let len = match std::fs::metadata(&path) {
        Ok(m) => Some(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(HuntError::BadInput(format!("{}: {e}", path.display()))),
    };
    let found = hunt_files(state_dir, len.unwrap_or(0) == 0);
    if len.unwrap_or(0) == 0 {
        return match (found.is_empty(), len) {
            (true, _) => Ok(()),
            (false, None) => Err(refusal(state_dir, "is missing", &found)),
            (false, Some(_)) => Err(refusal(state_dir, "is empty", &found)),
        };
    }
    let entries = match Journal::open(&path).and_then(|j| j.verify()) {
        Ok(entries) => entries,
        Err(e) => return Err(unreadable(state_dir, e, &found)?),
    };
    match entries {
        None if found.is_empty() => Ok(()),
        None => Err(refusal(state_dir, "holds no hunt", &found)),
        Some(_) => Ok(()),
    }
}

/// Refuses (exit 2) this hunt's journal when the state directory holds the output of a run it
/// does not record: the journal lost its last events. Called once the journal is known to be
/// this hunt's ([`super::prelude::begin_or_resume`]): another hunt's journal records none of
/// this hunt's runs, and is refused as another hunt's, not as one that lost events (issue 32,
/// finding 9).
pub fn check_runs_recorded(state_dir: &Path, entries: &[Entry]) -> Result<(), HuntError> {
    match lost_run(state_dir, entries) {
        Some(log) => Err(refusal(
            state_dir,
            &format!(
                "has lost its last events: {log} is the output of a run of the command that \
                 the journal does not record (was journal.sqlite-wal deleted or damaged?)"
            ),
            &hunt_files(state_dir, false),
        )),
        None => Ok(()),
    }
}

/// The refusal for a journal that cannot be opened or is not whole; errors that say nothing
/// about the journal's contents (a full disk, permissions) are passed on as they are.
fn unreadable(state_dir: &Path, e: JournalError, found: &[String]) -> Result<HuntError, HuntError> {
    let what = match &e {
        JournalError::Damaged { what, .. } => what.clone(),
        JournalError::Sqlite {
            source: source @ rusqlite::Error::SqliteFailure(f, _),
            ..
        } if matches!(
            f.code,
            rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
        ) =>
        {
            format!("SQLite cannot read it ({source})")
        }
        _ => return Err(e.into()),
    };
    Ok(refusal(state_dir, &format!("is not whole: {what}"), found))
}

/// The message for a state directory that cannot be resumed: what is wrong, what is there,
/// and the two ways to start afresh.
fn refusal(state_dir: &Path, what: &str, found: &[String]) -> HuntError {
    let beside = match found {
        [] => String::new(),
        f => format!(" beside this hunt's {}", f.join(", ")),
    };
    HuntError::BadInput(format!(
        "{dir} cannot be resumed: its journal {journal} {what}. The journal is the hunt: without a \
         whole one firstbad cannot tell what was done, and will not start over{beside}. To \
         start this hunt afresh, rerun with `firstbad run --fresh`, which moves everything in \
         {dir} into {dir}/discarded-<time>/, or set hunt.state_dir to an empty directory",
        dir = state_dir.display(),
        journal = journal_path(state_dir).display(),
    ))
}

/// The hunt files in a state directory that hold something, as `logs/ (3 entries)`, and
/// with `sidecars`, the journal's sidecar files (`journal.sqlite-wal`) that do.
fn hunt_files(state_dir: &Path, sidecars: bool) -> Vec<String> {
    let mut found: Vec<String> = HUNT_FILES
        .iter()
        .filter_map(|name| {
            let n = std::fs::read_dir(state_dir.join(name)).ok()?.count();
            (n > 0).then(|| format!("{name}/ ({n} {})", if n == 1 { "entry" } else { "entries" }))
        })
        .collect();
    for sidecar in ["-wal", "-journal"].iter().filter(|_| sidecars) {
        let mut p = journal_path(state_dir).into_os_string();
        p.push(sidecar);
        if std::fs::metadata(&p).is_ok_and(|m| m.len() > 0) {
            found.push(
                Path::new(&p)
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            );
        }
    }
    found
}

/// A command's output in `logs/` (named by its commit's full id) whose run the journal does
/// not record: every run is journalled before its output file is made, so only a journal
/// that lost its last events has one.
fn lost_run(state_dir: &Path, entries: &[Entry]) -> Option<String> {
    let started: HashSet<&str> = entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::TestStarted { commit, .. } => Some(commit.as_str()),
            _ => None,
        })
        .collect();
    let mut logs: Vec<String> = std::fs::read_dir(state_dir.join("logs"))
        .ok()?
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .collect();
    logs.sort();
    logs.into_iter()
        .find(|name| {
            let commit = name.get(..40).unwrap_or("");
            commit.bytes().all(|b| b.is_ascii_hexdigit())
                && commit.len() == 40
                && !started.contains(commit)
        })
        .map(|name| format!("logs/{name}"))
}

/// `firstbad run --fresh`: moves everything in `state_dir` but its locks and earlier
/// discarded hunts into `<state_dir>/discarded-<UTC time>/`, under the run lock (refused
/// while a hunt runs there). Nothing is deleted. Returns where the files went, if anywhere.
pub fn start_afresh(state_dir: &Path) -> Result<Option<PathBuf>, HuntError> {
    if !state_dir.is_dir() {
        return Ok(None);
    }
    let _lock = hold(state_dir)?;
    let io = |what: &Path, e: std::io::Error| {
        HuntError::BadInput(format!("--fresh: {}: {e}", what.display()))
    };
    let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(state_dir)
        .map_err(|e| io(state_dir, e))?
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .filter(|n| {
            let n = n.to_string_lossy();
            !LOCKS.contains(&n.as_ref()) && !n.starts_with("discarded-")
        })
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    names.sort();
    let dest = discard_dir(state_dir);
    std::fs::create_dir(&dest).map_err(|e| io(&dest, e))?;
    for name in names {
        let from = state_dir.join(&name);
        std::fs::rename(&from, dest.join(&name)).map_err(|e| io(&from, e))?;
    }
    unlink_checkouts(&dest.join("checkouts"));
    Ok(Some(dest))
}

/// A new `discarded-<UTC time>` directory name in `state_dir` (`-2`, `-3`… within a second).
fn discard_dir(state_dir: &Path) -> PathBuf {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    // "2026-12-01 23:14:23 +0000" → "20261201-231423"
    let stamp: String = crate::history::iso_date(now, 0)[..19]
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '0'..='9' => Some(c),
            _ => None,
        })
        .collect();
    let base = format!("discarded-{stamp}");
    std::iter::once(base.clone())
        .chain((2..).map(|n| format!("{base}-{n}")))
        .map(|name| state_dir.join(name))
        .find(|p| !p.exists())
        .expect("some suffix is unused")
}

/// Cuts the discarded checkouts' links to the repository (each `.git` file becomes
/// `.git.discarded`): the new hunt makes worktrees of the same names, which git commands
/// run in a discarded checkout would otherwise change.
fn unlink_checkouts(checkouts: &Path) {
    let Ok(dir) = std::fs::read_dir(checkouts) else {
        return;
    };
    for entry in dir.flatten() {
        let link = entry.path().join(".git");
        if link.is_file() {
            std::fs::rename(&link, entry.path().join(".git.discarded")).ok();
        }
    }
}

/// Checks, before a hunt's end is given, that it is saved: the journal file at its path is
/// still the one this run opened (same device and inode), and the `Finished` event with this
/// end, read back from it, is its last. A state directory removed, moved or replaced during
/// the run fails this (exit 5): before, such a run printed a culprit that no journal held
/// (issue 19, finding 6).
pub fn confirm_saved(journal: &Journal, end: &HuntEnd) -> Result<(), HuntError> {
    journal.still_at_path()?;
    match last_event_is(journal.path(), journal.stage_name(), end) {
        None => Ok(()),
        Some(why) => Err(HuntError::NotSaved(format!(
            "{why}: the hunt's result was not saved, so it is not given; rerun to resume"
        ))),
    }
}

/// Why the journal at `path`, read afresh, does not end `stage`'s events with
/// `Finished { end }`, if it does not.
fn last_event_is(path: &Path, stage: &str, end: &HuntEnd) -> Option<String> {
    let last = Journal::open_read_only(path)
        .and_then(|j| j.stage(stage).events())
        .map(|mut e| e.pop().map(|e| e.event));
    match last {
        Ok(Some(Event::Finished { end: saved })) if saved == *end => None,
        Ok(_) => Some(format!(
            "{} does not hold the hunt's end as its last event",
            path.display()
        )),
        Err(e) => Some(format!("the end cannot be read back: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::HuntIdentity;

    /// A state directory whose journal holds a started hunt that tested `c` (a full id).
    fn hunt_dir(c: &str) -> (tempfile::TempDir, Journal) {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(&journal_path(dir.path())).unwrap();
        let id = HuntIdentity {
            good: "a".repeat(40),
            bad: "b".repeat(40),
            fingerprint: "f".into(),
            meaning: Default::default(),
        };
        j.start(&id, &[Event::HuntStarted { candidates: 5 }])
            .unwrap();
        j.append(&Event::TestStarted {
            commit: c.into(),
            job: 0,
        })
        .unwrap();
        write(dir.path(), &format!("logs/{c}.log"), "ok\n");
        (dir, j)
    }

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn refused(dir: &Path) -> String {
        let e = check_state_dir(dir).expect_err("refused");
        assert_eq!(e.exit_code(), 2, "{e}");
        let e = e.to_string();
        assert!(e.contains("`firstbad run --fresh`"), "{e}");
        assert!(
            e.contains("set hunt.state_dir to an empty directory"),
            "{e}"
        );
        e
    }

    // issue 19, finding 8
    #[test]
    fn a_second_run_of_a_hunt_is_refused_with_exit_2_while_the_first_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock_state_dir(dir.path()).expect("the first run takes it");
        for _ in 0..3 {
            let e = lock_state_dir(dir.path()).expect_err("the second run is refused");
            assert_eq!(e.exit_code(), 2);
            assert!(
                e.to_string()
                    .contains(&format!("pid {}", std::process::id())),
                "{e}"
            );
        }
        drop(held);
        lock_state_dir(dir.path()).expect("free again once the first run ends");
    }

    // issue 19, finding 6
    #[test]
    fn a_zero_length_journal_beside_logs_is_refused_naming_both_and_the_way_to_start_afresh() {
        let (dir, j) = hunt_dir(&"c".repeat(40));
        drop(j);
        std::fs::File::create(journal_path(dir.path())).unwrap();
        let e = refused(dir.path());
        assert!(
            e.contains(&format!(
                "its journal {} is empty",
                journal_path(dir.path()).display()
            )) && e.contains("logs/ (1 entry)"),
            "{e}"
        );
    }

    // issue 19, finding 6
    #[test]
    fn a_missing_journal_beside_checkouts_or_consoles_is_refused() {
        for files in ["checkouts/job0/n", "consoles/0123456789ab-boot1.log"] {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), files, "0\n");
            let e = refused(dir.path());
            assert!(e.contains("is missing"), "{e}");
            let top = files.split('/').next().unwrap();
            assert!(e.contains(&format!("{top}/ (1 entry)")), "{e}");
        }
    }

    // issue 19, item 5: "What `firstbad try` leaves behind does not count as a hunt".
    #[test]
    fn what_firstbad_try_and_the_locks_leave_is_no_hunt() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("try")).unwrap();
        Journal::open(&dir.path().join("try/try.sqlite")).unwrap();
        write(dir.path(), "try/consoles/0123456789ab-boot1.log", "boot\n");
        write(dir.path(), "hosts/qemu/scratch.img", "");
        write(dir.path(), "run.lock", "1");
        write(dir.path(), "lock", "");
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        check_state_dir(dir.path()).expect("no hunt here, so a new one may start");
        lock_state_dir(dir.path()).expect("and take the directory");
    }

    // issue 19, finding 6: the -wal deleted, the journal file holds an empty database.
    #[test]
    fn a_journal_holding_no_hunt_beside_a_hunts_logs_is_refused() {
        let (dir, j) = hunt_dir(&"c".repeat(40));
        drop(j);
        std::fs::remove_file(journal_path(dir.path())).unwrap();
        Journal::open(&journal_path(dir.path())).unwrap();
        let e = refused(dir.path());
        assert!(e.contains("holds no hunt"), "{e}");
    }

    // issue 19, finding 6
    #[test]
    fn a_damaged_journal_is_refused_even_with_nothing_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(journal_path(dir.path()), [7u8; 9000]).unwrap();
        let e = refused(dir.path());
        assert!(e.contains("SQLite cannot read it"), "{e}");
    }

    // issue 19, finding 6: a -wal cut after the hunt's first events.
    #[test]
    fn a_log_the_journal_does_not_record_means_it_lost_its_last_events() {
        let (dir, j) = hunt_dir(&"c".repeat(40));
        let entries = j.events().unwrap();
        check_runs_recorded(dir.path(), &entries).expect("every log is journalled");
        let lost = "d".repeat(40);
        write(dir.path(), &format!("logs/{lost}.log"), "");
        check_state_dir(dir.path()).expect("whole: the lost run is this hunt's to judge");
        let e = check_runs_recorded(dir.path(), &entries).expect_err("refused");
        assert_eq!(e.exit_code(), 2, "{e}");
        let e = e.to_string();
        assert!(e.contains(&format!("logs/{lost}.log is the output")), "{e}");
        assert!(e.contains("`firstbad run --fresh`"), "{e}");
    }

    #[test]
    fn fresh_moves_everything_but_the_locks_aside_and_deletes_nothing() {
        let (dir, j) = hunt_dir(&"c".repeat(40));
        drop(j);
        let d = dir.path();
        write(d, "checkouts/job0/.git", "gitdir: /elsewhere\n");
        write(d, "try/try.sqlite", "");
        write(d, "run.lock", "1");
        let first = start_afresh(d).unwrap().expect("something to move");
        assert!(first.starts_with(d), "{}", first.display());
        let moved = |p: &str| first.join(p).exists() && !d.join(p).exists();
        for p in ["journal.sqlite", "logs", "try/try.sqlite"] {
            assert!(moved(p), "{p} was not moved into {}", first.display());
        }
        assert!(first.join("checkouts/job0/.git.discarded").is_file());
        assert!(d.join("run.lock").exists());
        check_state_dir(d).expect("a fresh hunt may start");
        // A second --fresh in the same second leaves the first discarded hunt alone.
        write(d, "logs/x.log", "");
        let second = start_afresh(d).unwrap().expect("logs/ to move");
        assert_ne!(second, first);
        assert!(first.join("journal.sqlite").exists() && second.join("logs/x.log").exists());
        assert_eq!(start_afresh(d).unwrap(), None, "nothing left to move");
    }

    #[test]
    fn fresh_is_refused_while_a_hunt_runs() {
        let dir = tempfile::tempdir().unwrap();
        let _held = lock_state_dir(dir.path()).unwrap();
        write(dir.path(), "logs/x.log", "");
        let e = start_afresh(dir.path()).expect_err("refused");
        assert_eq!(e.exit_code(), 2);
        assert!(dir.path().join("logs/x.log").exists());
    }

    fn finished(j: &Journal) -> HuntEnd {
        let end = HuntEnd::Found {
            commit: "c".repeat(40),
        };
        j.append(&Event::Finished { end: end.clone() }).unwrap();
        end
    }

    // issue 19, finding 6: "A state directory deleted during a run printed a culprit that was
    // never saved."
    #[test]
    fn an_end_is_given_only_when_the_journal_at_its_path_holds_it() {
        let (dir, j) = hunt_dir(&"c".repeat(40));
        let end = finished(&j);
        confirm_saved(&j, &end).expect("saved");
        let other = HuntEnd::NotReproduced {
            message: "no".into(),
        };
        let e = confirm_saved(&j, &other).expect_err("not this end");
        assert_eq!((e.exit_code(), e.resumes()), (5, false), "{e}");
        std::fs::remove_dir_all(dir.path()).unwrap();
        let e = confirm_saved(&j, &end).expect_err("the directory is gone");
        assert_eq!((e.exit_code(), e.resumes()), (5, false), "{e}");
        assert!(e.to_string().contains("removed, moved or replaced"), "{e}");
    }

    // Found by tests/chain.rs: the source stage's end was read back from the prebuilt
    // stage's events, and a chained hunt's right answer was withheld (exit 5).
    #[test]
    fn a_later_stages_end_is_read_back_from_its_own_events() {
        let (dir, first) = hunt_dir(&"c".repeat(40));
        finished(&first);
        let source = Journal::open(&journal_path(dir.path()))
            .unwrap()
            .stage("source");
        let id = HuntIdentity {
            good: "d".repeat(40),
            bad: "e".repeat(40),
            fingerprint: "g".into(),
            meaning: Default::default(),
        };
        source
            .start(&id, &[Event::HuntStarted { candidates: 3 }])
            .unwrap();
        let end = HuntEnd::Found {
            commit: "e".repeat(40),
        };
        source
            .append(&Event::Finished { end: end.clone() })
            .unwrap();
        confirm_saved(&source, &end).expect("the source stage's end is saved");
    }

    #[test]
    fn an_end_is_not_given_when_the_state_directory_was_replaced_by_a_copy() {
        let (dir, j) = hunt_dir(&"c".repeat(40));
        let end = finished(&j);
        let copy = dir.path().join("copy.sqlite");
        std::fs::copy(journal_path(dir.path()), &copy).unwrap();
        std::fs::rename(&copy, journal_path(dir.path())).unwrap();
        let e = confirm_saved(&j, &end).expect_err("another file");
        assert_eq!(e.exit_code(), 5, "{e}");
    }
}
