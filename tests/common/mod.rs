//! What the end-to-end tests on real kernels share: the demo tree, the static agent, the
//! firstbad binary, git and the journal read back.
#![allow(dead_code)] // each test binary uses its own part of this

pub mod distccd;

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

pub fn firstbad() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_firstbad"));
    c.env("FIRSTBAD_AGENT", agent());
    c
}

/// The demo tree (built once per machine by the script, then cached).
pub fn demo_tree() -> &'static Path {
    static TREE: OnceLock<PathBuf> = OnceLock::new();
    TREE.get_or_init(|| {
        let out = Command::new(root().join("scripts/make-demo-tree"))
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/make-demo-tree runs");
        assert!(out.status.success(), "make-demo-tree failed");
        let path = String::from_utf8(out.stdout).unwrap();
        PathBuf::from(
            path.lines()
                .last()
                .expect("make-demo-tree prints the path")
                .trim(),
        )
    })
}

/// The static agent.
pub fn agent() -> &'static Path {
    static AGENT: OnceLock<PathBuf> = OnceLock::new();
    AGENT.get_or_init(|| {
        if let Some(p) = std::env::var_os("FIRSTBAD_AGENT") {
            return PathBuf::from(p);
        }
        let out = Command::new(root().join("scripts/build-agent"))
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/build-agent runs");
        assert!(out.status.success(), "build-agent failed");
        let path = String::from_utf8(out.stdout).unwrap();
        PathBuf::from(path.lines().last().unwrap().trim())
    })
}

/// `key=value` lines that make-demo-tree writes into the demo repository's git dir.
pub fn demo_fact(key: &str) -> String {
    let text = std::fs::read_to_string(demo_tree().join(".git/firstbad-demo")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in .git/firstbad-demo"))
        .to_owned()
}

pub fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The commit whose subject is `subject`, between demo-good and demo-bad.
pub fn commit_by_subject(subject: &str) -> String {
    let log = git(
        demo_tree(),
        &["log", "--format=%H %s", "demo-good..demo-bad"],
    );
    log.lines()
        .find_map(|l| {
            let (id, s) = l.split_once(' ')?;
            (s == subject).then(|| id.to_owned())
        })
        .unwrap_or_else(|| panic!("no commit {subject:?} in the demo tree"))
}

/// The demo's kernel tables, TCG qemu host and fsync workload: every e2e test builds the
/// same kernels, which the build cache shares between them.
pub fn kernel_tables() -> String {
    format!(
        r#"[build]
config = "{root}/configs/kernel/qemu-x86_64.config"
jobs = 2

[[hosts]]
kind = "qemu"
accel = "tcg"
memory_mb = 1024
boot_timeout_s = 240

[workload]
file = "{root}/workloads/fsync-latency.toml"
metric = "fsync_latency_p50_ms"
timeout_s = 300
"#,
        root = root().display(),
    )
}

pub fn journal_events(state: &Path) -> Vec<(String, Option<String>, serde_json::Value)> {
    journal_file_events(&state.join("journal.sqlite"))
}

/// The events of the journal file `db` (a hunt's, or `try/try.sqlite`): kind, commit, body.
pub fn journal_file_events(db: &Path) -> Vec<(String, Option<String>, serde_json::Value)> {
    let conn = Connection::open(db).unwrap();
    let mut st = conn
        .prepare("SELECT kind, commit_id, body FROM events ORDER BY seq")
        .unwrap();
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .unwrap()
        .map(|r| {
            let (k, c, b) = r.unwrap();
            (k, c, serde_json::from_str(&b).unwrap())
        })
        .collect();
    rows
}

/// Spawns `firstbad <args>`, waits (at most an hour) until `ready` says so, lets the step under
/// way run 3 s more, and kills it with SIGKILL. Checks that no VM outlived it.
pub fn kill_9_when(args: &[&std::ffi::OsStr], ready: impl Fn() -> bool) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = firstbad()
        .args(args)
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3600);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let said = std::fs::read_to_string(log.path()).unwrap_or_default();
            panic!("firstbad {args:?} ended ({status}) before it could be killed:\n{said}");
        }
        if ready() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the moment to kill firstbad {args:?} did not come within an hour"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    std::thread::sleep(std::time::Duration::from_secs(3)); // into the step
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(qemu_children(pid), 0, "a VM outlived a killed firstbad");
}

pub fn qemu_children(pid: u32) -> usize {
    // qemu dies with firstbad (PR_SET_PDEATHSIG); count qemu processes whose parent was it.
    let out = Command::new("ps")
        .args(["-eo", "ppid=,comm="])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            let mut it = l.split_whitespace();
            it.next() == Some(&pid.to_string()) && it.next().is_some_and(|c| c.starts_with("qemu"))
        })
        .count()
}

/// With `FIRSTBAD_E2E_KEEP` set, keeps a hunt test's directory (journal, consoles) for a
/// person to read, and says where.
pub fn keep_if_asked(dir: tempfile::TempDir) {
    if std::env::var_os("FIRSTBAD_E2E_KEEP").is_some() {
        eprintln!("kept {}", dir.keep().display());
    }
}
