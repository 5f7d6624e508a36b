//! The journal is the hunt (issue 19, item 5 and finding 6), through the real `firstbad`
//! binary on command hunts: a state directory with a hunt's files but no whole journal is
//! refused with exit 2, `--fresh` moves it aside, what `firstbad try` leaves is no hunt, and a
//! state directory removed during a run gives exit 5 and no culprit.

mod common;
use common::dag::{linear_shape, write_repo};
use firstbad::journal::{Event, Journal};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// 16 commits in a line, BUG from c9 on; the test fails on BUG.
struct Case {
    dir: tempfile::TempDir,
    ids: Vec<String>,
}

/// The culprit's index.
const CULPRIT: usize = 9;

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir");
        let ids = write_repo(&repo, &linear_shape(16), &|i| {
            if i >= CULPRIT {
                vec![("BUG", String::new())]
            } else {
                vec![]
            }
        });
        Case { dir, ids }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// A hunt file over the whole line whose command runs `first`, then fails on BUG.
    fn hunt(&self, first: &str) -> PathBuf {
        let p = self.dir.path().join("hunt.toml");
        std::fs::write(
            &p,
            format!(
                "[hunt]\nname = \"t\"\nrepo = \"repo\"\ngood = \"{}\"\nbad = \"{}\"\n\
                 state_dir = \"state\"\n\n[test]\ncommand = '''\n{first}\ntest -e BUG && exit 1\nexit 0'''\n",
                self.ids[0], self.ids[15]
            ),
        )
        .expect("write hunt file");
        p
    }

    /// `firstbad run [args] hunt.toml`.
    fn run(&self, hunt: &Path, args: &[&str]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_firstbad"))
            .arg("run")
            .args(args)
            .arg(hunt)
            .env("FIRSTBAD_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .expect("firstbad runs");
        Run::from(out)
    }

    /// A finished hunt: the state directory holds its journal, logs and checkout.
    fn finished(&self) -> PathBuf {
        let hunt = self.hunt("true");
        let run = self.run(&hunt, &[]);
        run.found(&self.ids[CULPRIT]);
        hunt
    }

    /// The state directory as an old firstbad (the journal in WAL mode) left it when killed
    /// with -9 after its third run of the command had started: the database file holds no
    /// page but its header, and every event is in `journal.sqlite-wal`.
    fn killed_in_wal_mode(&self) -> PathBuf {
        let count = self.dir.path().join("count");
        let hunt = self.hunt(&format!(
            "c=$(cat {count} 2>/dev/null || echo 0); echo $((c + 1)) > {count}\n\
             test $c = 2 && kill -9 $(cat {lock}) && sleep 0.2",
            count = count.display(),
            lock = self.state().join("run.lock").display()
        ));
        let run = self.run(&hunt, &[]);
        assert_eq!(run.code, None, "killed: {}", run.stderr);
        let journal = self.state().join("journal.sqlite");
        let tmp = tempfile::tempdir().expect("tempdir");
        let conn = rusqlite::Connection::open(tmp.path().join("journal.sqlite")).expect("open");
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=0;
             CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, at_ms INTEGER NOT \
             NULL, kind TEXT NOT NULL, commit_id TEXT, body TEXT NOT NULL);",
        )
        .expect("an old journal");
        conn.execute("ATTACH ?1 AS old", [journal.display().to_string()])
            .expect("attach");
        conn.execute_batch("INSERT INTO meta SELECT * FROM old.meta")
            .expect("identity");
        // One write per event, as the old firstbad made them.
        let n: i64 = conn
            .query_row("SELECT count(*) FROM old.events", [], |r| r.get(0))
            .expect("count");
        for seq in 1..=n {
            conn.execute(
                "INSERT INTO events SELECT seq, at_ms, kind, commit_id, body FROM old.events \
                 WHERE seq = ?1",
                [seq],
            )
            .expect("event");
        }
        conn.execute_batch("DETACH old").expect("detach");
        // Copied while the connection is open: nothing checkpointed, as after kill -9.
        std::fs::remove_file(&journal).expect("rm");
        for ext in ["", "-wal"] {
            std::fs::copy(
                tmp.path().join(format!("journal.sqlite{ext}")),
                self.state().join(format!("journal.sqlite{ext}")),
            )
            .expect("copy");
        }
        drop(conn);
        std::fs::write(self.dir.path().join("count"), "100").expect("no more kills");
        assert_eq!(
            std::fs::metadata(&journal).expect("journal").len(),
            4096,
            "only the header"
        );
        hunt
    }
}

/// How a `firstbad run` ended.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Asserts that the run printed `culprit` as the first bad commit and exited 0.
    fn found(&self, culprit: &str) {
        assert_eq!(self.code, Some(0), "{}", self.stderr);
        assert!(
            self.stdout
                .starts_with(&format!("first bad commit: {}", &culprit[..12])),
            "{}",
            self.stdout
        );
    }

    /// Asserts that the run was refused with exit 2, no culprit, and the way to start afresh,
    /// and that its message says `what`.
    fn refused(&self, what: &str) {
        assert_eq!(self.code, Some(2), "{}{}", self.stdout, self.stderr);
        assert!(!self.stdout.contains("first bad commit"), "{}", self.stdout);
        for part in [
            what,
            "cannot be resumed",
            "firstbad run --fresh",
            "empty directory",
        ] {
            assert!(
                self.stderr.contains(part),
                "no {part:?} in: {}",
                self.stderr
            );
        }
    }
}

/// The number of runs of the command the journal holds.
fn runs(state: &Path) -> usize {
    Journal::open_read_only(&state.join("journal.sqlite"))
        .and_then(|j| j.events())
        .expect("journal")
        .iter()
        .filter(|e| matches!(e.event, Event::TestStarted { .. }))
        .count()
}

// issue 19, finding 6: a zero-length journal beside the logs started the hunt over, exit 0.
#[test]
fn a_zero_length_journal_beside_logs_is_refused_with_exit_2() {
    let case = Case::new();
    let hunt = case.finished();
    std::fs::File::create(case.state().join("journal.sqlite")).expect("truncate");
    let run = case.run(&hunt, &[]);
    run.refused("journal.sqlite is empty");
    assert!(
        run.stderr.contains("beside this hunt's logs/ ("),
        "{}",
        run.stderr
    );
}

// issue 19, finding 6
#[test]
fn a_deleted_journal_beside_checkouts_is_refused_with_exit_2() {
    let case = Case::new();
    let hunt = case.finished();
    std::fs::remove_file(case.state().join("journal.sqlite")).expect("rm");
    std::fs::remove_dir_all(case.state().join("logs")).expect("rm logs");
    case.run(&hunt, &[]).refused("journal.sqlite is missing");
    let run = case.run(&hunt, &[]);
    assert!(
        run.stderr.contains("checkouts/ (1 entry)"),
        "{}",
        run.stderr
    );
}

// issue 19, finding 6: the events table was recreated empty and the hunt began again.
#[test]
fn a_dropped_events_table_is_refused_with_exit_2() {
    let case = Case::new();
    let hunt = case.finished();
    rusqlite::Connection::open(case.state().join("journal.sqlite"))
        .and_then(|c| c.execute_batch("DROP TABLE events"))
        .expect("drop");
    case.run(&hunt, &[])
        .refused("is not whole: its events table is missing");
}

/// A hunt left by an old firstbad in WAL mode resumes: its -wal is read, and no commit with
/// a result is run again.
#[test]
fn a_journal_left_in_wal_mode_resumes_where_it_ended() {
    let case = Case::new();
    let hunt = case.killed_in_wal_mode();
    let before = runs(&case.state());
    assert_eq!(before, 3);
    case.run(&hunt, &[]).found(&case.ids[CULPRIT]);
    // The killed third run is run again, and one more after it.
    assert_eq!(runs(&case.state()), before + 2);
    assert!(
        !case.state().join("journal.sqlite-wal").exists(),
        "no longer WAL"
    );
}

// issue 19, finding 6: a deleted, cut or overwritten -wal started the hunt over, exit 0.
#[test]
fn a_lost_or_damaged_wal_is_refused_with_exit_2_never_a_fresh_start() {
    let case = Case::new();
    let hunt = case.killed_in_wal_mode();
    let keep = case.dir.path().join("killed");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(case.state())
        .arg(&keep)
        .status()
        .expect("cp")
        .success());
    let wal = case.state().join("journal.sqlite-wal");
    let len = std::fs::metadata(keep.join("journal.sqlite-wal"))
        .expect("wal")
        .len();
    // A WAL file is a 32-byte header and frames of a 24-byte header and one 4096-byte page;
    // cut at every frame, in the middle of one, and not at all but overwritten.
    let mut damage: Vec<(String, Box<dyn Fn()>)> = vec![(
        "deleted".into(),
        Box::new(|| std::fs::remove_file(&wal).expect("rm")),
    )];
    for cut in (32..len).step_by(4120).chain([len / 2]) {
        let wal = wal.clone();
        damage.push((
            format!("cut to {cut} of {len} bytes"),
            Box::new(move || {
                let f = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
                f.set_len(cut).unwrap();
            }),
        ));
    }
    damage.push((
        "overwritten".into(),
        Box::new(|| std::fs::write(&wal, vec![0x5a; len as usize]).expect("write")),
    ));
    for (what, harm) in &damage {
        std::fs::remove_dir_all(case.state()).expect("rm");
        assert!(Command::new("cp")
            .arg("-a")
            .arg(&keep)
            .arg(case.state())
            .status()
            .expect("cp")
            .success());
        harm();
        let run = case.run(&hunt, &[]);
        assert_eq!(
            run.code,
            Some(2),
            "-wal {what}: {}{}",
            run.stdout,
            run.stderr
        );
        run.refused("cannot be resumed");
    }
    eprintln!("{} kinds of -wal damage refused", damage.len());
}

// issue 19, item 5: "What `firstbad try` leaves behind does not count as a hunt."
#[test]
fn what_firstbad_try_leaves_is_no_hunt_and_a_new_hunt_starts_beside_it() {
    let case = Case::new();
    let try_dir = case.state().join("try");
    std::fs::create_dir_all(try_dir.join("consoles")).expect("mkdir");
    let j = Journal::open(&try_dir.join("try.sqlite")).expect("try journal");
    j.append(&Event::BuildStarted {
        commit: case.ids[3].clone(),
    })
    .expect("append");
    std::fs::write(try_dir.join("consoles").join("x-boot1.log"), "boot\n").expect("write");
    std::fs::create_dir_all(case.state().join("hosts/qemu")).expect("mkdir");
    std::fs::write(case.state().join("hosts/qemu/scratch.img"), "").expect("write");
    std::fs::write(case.state().join("run.lock"), "1").expect("write");
    let hunt = case.hunt("true");
    case.run(&hunt, &[]).found(&case.ids[CULPRIT]);
    assert!(try_dir.join("try.sqlite").exists());
}

// issue 19, item 5: the way out that the refusals name.
#[test]
fn fresh_moves_the_old_hunt_aside_and_starts_again() {
    let case = Case::new();
    let hunt = case.finished();
    let old_logs: Vec<_> = std::fs::read_dir(case.state().join("logs"))
        .expect("logs")
        .map(|e| e.expect("entry").file_name())
        .collect();
    std::fs::File::create(case.state().join("journal.sqlite")).expect("truncate");
    case.run(&hunt, &[]).refused("is empty");
    let run = case.run(&hunt, &["--fresh"]);
    run.found(&case.ids[CULPRIT]);
    assert!(
        run.stderr
            .contains("--fresh: moved the earlier hunt's files into"),
        "{}",
        run.stderr
    );
    let discarded: Vec<PathBuf> = std::fs::read_dir(case.state())
        .expect("state")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("discarded-")
        })
        .collect();
    assert_eq!(discarded.len(), 1, "{discarded:?}");
    let d = &discarded[0];
    assert_eq!(
        std::fs::metadata(d.join("journal.sqlite"))
            .expect("kept")
            .len(),
        0
    );
    for log in &old_logs {
        assert!(d.join("logs").join(log).exists(), "{log:?} was not kept");
    }
    assert!(d.join("checkouts/job0/n").exists());
    // The new hunt is whole: a rerun gives its end again.
    case.run(&hunt, &[]).found(&case.ids[CULPRIT]);
}

/// The commit the hunt runs the command on last, from a hunt in another state directory.
fn last_tested(case: &Case) -> String {
    let hunt = case.finished();
    let entries = Journal::open_read_only(&case.state().join("journal.sqlite"))
        .and_then(|j| j.events())
        .expect("journal");
    let last = entries
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::TestStarted { commit, .. } => Some(commit.clone()),
            _ => None,
        })
        .expect("a run");
    drop(hunt);
    std::fs::remove_dir_all(case.state()).expect("rm");
    last
}

// issue 19, finding 6: "A state directory deleted during a run printed a culprit that was
// never saved."
#[test]
fn a_state_directory_removed_moved_or_replaced_during_the_last_run_gives_exit_5_and_no_culprit() {
    let case = Case::new();
    let last = last_tested(&case);
    let state = case.state().display().to_string();
    for (what, how) in [
        ("removed", format!("rm -rf {state}")),
        ("moved", format!("mv {state} {state}.moved")),
        (
            "replaced",
            format!("cp -a {state} {state}.copy && rm -rf {state} && mv {state}.copy {state}"),
        ),
    ] {
        let hunt = case.hunt(&format!("test $FIRSTBAD_COMMIT = {last} && {{ {how}; }}"));
        let run = case.run(&hunt, &[]);
        assert_eq!(run.code, Some(5), "{what}: {}{}", run.stdout, run.stderr);
        assert!(
            !run.stdout.contains("first bad commit"),
            "{what}: {}",
            run.stdout
        );
        assert!(
            run.stderr
                .contains("removed, moved or replaced during the run")
                && !run.stderr.contains("the journal is intact"),
            "{what}: {}",
            run.stderr
        );
        for d in [case.state(), PathBuf::from(format!("{state}.moved"))] {
            if d.exists() {
                std::fs::remove_dir_all(d).expect("rm");
            }
        }
    }
}

/// The kinds of a journal's events, in order.
fn kinds(state: &Path) -> Vec<String> {
    Journal::open_read_only(&state.join("journal.sqlite"))
        .and_then(|j| j.events())
        .expect("journal")
        .iter()
        .map(|e| {
            serde_json::to_value(&e.event).expect("serialises")["event"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect()
}

// Issue 32, finding 9: with its last events deleted a journal resumed once (its next number
// was past the deleted ones) and was refused the next time as "events N to M are missing".
// Whole is one rule: every number the journal ever gave is in it, the last ones too.
#[test]
fn a_journal_that_lost_its_last_events_is_refused_the_first_time_and_every_time() {
    let case = Case::new();
    let hunt = case.finished();
    let keep = case.dir.path().join("finished");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(case.state())
        .arg(&keep)
        .status()
        .expect("cp")
        .success());
    let n = kinds(&case.state()).len();
    for lost in 1..=3 {
        std::fs::remove_dir_all(case.state()).expect("rm");
        assert!(Command::new("cp")
            .arg("-a")
            .arg(&keep)
            .arg(case.state())
            .status()
            .expect("cp")
            .success());
        rusqlite::Connection::open(case.state().join("journal.sqlite"))
            .and_then(|c| c.execute("DELETE FROM events WHERE seq > ?1", [(n - lost) as i64]))
            .expect("delete");
        let first = n - lost + 1;
        let said = if lost == 1 {
            format!("is not whole: its last event, {n}, is missing")
        } else {
            format!("is not whole: its last events, {first} to {n}, are missing")
        };
        for attempt in ["first", "second"] {
            let run = case.run(&hunt, &[]);
            assert_eq!(
                run.code,
                Some(2),
                "{lost} lost, {attempt} run: {}{}",
                run.stdout,
                run.stderr
            );
            run.refused(&said);
        }
    }
}

// Issue 32, finding 9: another hunt's journal put into this hunt's state directory was
// refused as "has lost its last events" (this hunt's logs are not in it), a wrong diagnosis
// with a wrong fix. It holds another hunt, and the refusal names both.
#[test]
fn another_hunts_journal_is_refused_as_another_hunt_naming_both() {
    let case = Case::new();
    let hunt = case.finished();
    let other = case.dir.path().join("other.toml");
    let text = std::fs::read_to_string(&hunt)
        .expect("hunt file")
        .replace(&case.ids[0], &case.ids[3])
        .replace("state_dir = \"state\"", "state_dir = \"other\"");
    std::fs::write(&other, text).expect("write");
    case.run(&other, &[]).found(&case.ids[CULPRIT]);
    std::fs::copy(
        case.dir.path().join("other/journal.sqlite"),
        case.state().join("journal.sqlite"),
    )
    .expect("copy");
    let run = case.run(&hunt, &[]);
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    let short = |i: usize| case.ids[i][..12].to_owned();
    for part in [
        "holds another hunt".to_owned(),
        format!("good {}, bad {}", short(3), short(15)),
        format!("good {}, bad {}", short(0), short(15)),
        "firstbad run --fresh".to_owned(),
    ] {
        assert!(run.stderr.contains(&part), "no {part:?} in: {}", run.stderr);
    }
    assert!(
        !run.stderr.contains("lost its last events"),
        "{}",
        run.stderr
    );
}

/// Issue 34, item 4: Ctrl-C (SIGINT) in the middle of a command hunt's run stops it at once:
/// exit 130 with a word on how to resume, and nothing the command started left running; the
/// rerun resumes and names the culprit.
#[test]
fn ctrl_c_mid_run_stops_the_command_and_a_rerun_resumes() {
    let case = Case::new();
    let (marker, go_on) = (
        case.dir.path().join("running"),
        case.dir.path().join("go-on"),
    );
    // Until go-on exists, a run says it is running and sleeps (a duration no other test uses,
    // so that its process is this test's).
    let hunt = case.hunt(&format!(
        "test -e {} || {{ touch {}; sleep 3117; }}",
        go_on.display(),
        marker.display()
    ));
    let sleeping = || {
        Command::new("pgrep")
            .args(["-f", "sleep 3117"])
            .output()
            .expect("pgrep runs")
            .status
            .success()
    };
    let log = tempfile::NamedTempFile::new().expect("temp file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .arg("run")
        .arg(&hunt)
        .env("FIRSTBAD_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("reopen"))
        .spawn()
        .expect("firstbad runs");
    let said = || std::fs::read_to_string(log.path()).unwrap_or_default();
    let waited = std::time::Instant::now();
    while !(marker.exists() && sleeping()) {
        assert!(
            child.try_wait().expect("wait").is_none(),
            "ended before its run: {}",
            said()
        );
        assert!(waited.elapsed().as_secs() < 120, "no run began: {}", said());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let signalled = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            signalled.elapsed().as_secs() < 30,
            "still running 30 s after SIGINT: {}",
            said()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "{}", said());
    assert!(
        said().contains("interrupted by SIGINT") && said().contains("rerun the same command"),
        "{}",
        said()
    );
    let gone = std::time::Instant::now();
    while sleeping() {
        assert!(
            gone.elapsed().as_secs() < 5,
            "the run's sleep outlived firstbad"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::write(&go_on, "").expect("write");
    case.run(&hunt, &[]).found(&case.ids[CULPRIT]);
}
