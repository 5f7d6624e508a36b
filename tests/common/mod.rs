//! What the end-to-end tests on real kernels share: the demo tree, the static agent, the
//! firstbad binary, git and the journal read back.
#![allow(dead_code)] // each test binary uses its own part of this

pub mod distccd;

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

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

/// `firstbad try hunt rev`: its exit code, stdout and stderr.
pub fn try_rev(hunt: &Path, rev: &str) -> (Option<i32>, String, String) {
    let out = firstbad().arg("try").arg(hunt).arg(rev).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `firstbad try --build-only hunt rev`, which must succeed: the kernel built and cached
/// before a test's deadline starts, so that no deadline holds a clean kernel build (issue 55:
/// a cold run went red on a 600-s deadline around the first build of demo-good).
/// Returns the build as `firstbad try` prints it (`image`, `kernel_release`, ...).
pub fn build_only(hunt: &Path, rev: &str) -> serde_json::Value {
    let out = firstbad()
        .args(["try", "--build-only"])
        .arg(hunt)
        .arg(rev)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "firstbad try --build-only {rev}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let build: serde_json::Value = stdout
        .strip_prefix("build: ")
        .and_then(|b| serde_json::from_str(b).ok())
        .unwrap_or_else(|| panic!("no build in:\n{stdout}"));
    assert!(build["image"].is_string(), "not built: {build}");
    build
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
    commit_in("demo-good..demo-bad", subject)
}

/// The commit whose subject is `subject` in `range` of the demo tree (a branch a script adds
/// to it, such as `demo-good..twostep`).
pub fn commit_in(range: &str, subject: &str) -> String {
    let log = git(demo_tree(), &["log", "--format=%H %s", range]);
    log.lines()
        .find_map(|l| {
            let (id, s) = l.split_once(' ')?;
            (s == subject).then(|| id.to_owned())
        })
        .unwrap_or_else(|| panic!("no commit {subject:?} in {range} of the demo tree"))
}

/// The demo's first-parent line from demo-good (excluded) to demo-bad, oldest first: the
/// nights of tests/watch.rs and the kernels tests/chain.rs exports are taken from it.
pub fn first_parent_line() -> Vec<String> {
    git(
        demo_tree(),
        &[
            "rev-list",
            "--first-parent",
            "--reverse",
            "demo-good..demo-bad",
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

/// Where `commit` stands on `line` ([`first_parent_line`]).
pub fn position(line: &[String], commit: &str) -> usize {
    line.iter()
        .position(|l| l == commit)
        .unwrap_or_else(|| panic!("{commit} is not on the first-parent line"))
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

/// [`kernel_tables`] with more fields on its qemu host (a disk preset, a scratch size).
pub fn kernel_tables_with_host(fields: &str) -> String {
    let tables = kernel_tables();
    let at = "boot_timeout_s = 240\n";
    assert!(tables.contains(at), "kernel_tables' host has {at:?}");
    tables.replace(at, &format!("{at}{fields}"))
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

/// How far into the step under way [`kill_9_when`] kills firstbad when the step runs in
/// firstbad itself (a build, a qemu boot): past the journal's write of its start, before its
/// end (TCG takes ~6 s to a healthy agent, then the workload runs).
pub const INTO_STEP: Duration = Duration::from_secs(3);

/// Spawns `firstbad <args>`, waits (at most an hour) until `ready` says so, lets the step under
/// way run `into_step` more, and kills it with SIGKILL. Checks that no VM outlived it.
///
/// firstbad must still run at the kill: one that ended first fails the test here, naming it,
/// instead of handing the caller a journal that no kill cut.
pub fn kill_9_when(args: &[&std::ffi::OsStr], into_step: Duration, ready: impl Fn() -> bool) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = firstbad()
        .args(args)
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let ended_first = |child: &mut std::process::Child| {
        if let Some(status) = child.try_wait().unwrap() {
            let said = std::fs::read_to_string(log.path()).unwrap_or_default();
            panic!("firstbad {args:?} ended ({status}) before it could be killed:\n{said}");
        }
    };
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        ended_first(&mut child);
        if ready() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the moment to kill firstbad {args:?} did not come within an hour"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let kill_at = Instant::now() + into_step;
    while Instant::now() < kill_at {
        ended_first(&mut child);
        std::thread::sleep(Duration::from_millis(100));
    }
    ended_first(&mut child);
    let vms = qemu_children(child.id());
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Each VM gets SIGKILL as firstbad dies (PR_SET_PDEATHSIG) and is gone once it has exited.
    // It is no longer firstbad's child by then (the kernel hands orphans to a reaper), so the
    // VMs are the ones it had at the kill.
    let gone = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<u32> = vms.iter().copied().filter(|&pid| alive(pid)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < gone,
            "a VM outlived a killed firstbad by 10 s: qemu {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The qemu processes whose parent is `pid`.
pub fn qemu_children(pid: u32) -> Vec<u32> {
    let out = Command::new("ps")
        .args(["-eo", "pid=,ppid=,comm="])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let child = it.next()?.parse().ok()?;
            (it.next() == Some(&pid.to_string()) && it.next()?.starts_with("qemu")).then_some(child)
        })
        .collect()
}

/// Whether process `pid` still runs: it exists and is not a zombie (an exited process
/// holds nothing but its entry until it is reaped).
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": the state follows the last ')', as comm may hold anything.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

/// With `FIRSTBAD_E2E_KEEP` set, keeps a hunt test's directory (journal, consoles) for a
/// person to read, and says where.
pub fn keep_if_asked(dir: tempfile::TempDir) {
    if std::env::var_os("FIRSTBAD_E2E_KEEP").is_some() {
        eprintln!("kept {}", dir.keep().display());
    }
}
