//! Nightly regression hunts end to end, on real parts: an "upstream" repository made from the
//! demo tree whose branch advances night by night, `firstbad watch` run once a night as cron
//! would run it, real kernel builds (shared with the other e2e tests through the build cache),
//! real qemu boots under TCG, the real agent and SQLite.
//!
//! The nights: 1 sets the reference (demo-good); 2's head is the demo's build break (a failed
//! night, recorded, no alarm); 3 is quiet, killed with `kill -9` in the middle of its boots
//! and resumed; 4 is the culprit's parent, quiet; 5 is the first head past the culprit (the
//! accumulating test confirms the regression there and the automatic hunt names the culprit);
//! 6 is still slow and opens nothing new. The mails go to a real SMTP server (aiosmtpd) and the
//! webhook to a receiver on 127.0.0.1, and both are read back.
//!
//! Two workloads a night (issue 36, item 5): the series' own `[workload]` reads a small cold
//! file, which the demo's regression does not touch; `fsync` (`[[series.workloads]]`), in
//! boots of its own, times the fsync loop it slows. The regression is named by that workload
//! and metric, and its hunt measures that workload.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Boots of the head and of the reference a night: what a lab spends on a nightly check.
const BOOTS: usize = 3;

/// A real SMTP server (Debian's python3-aiosmtpd) writing what it receives into a maildir.
struct Smtp {
    child: std::process::Child,
    port: u16,
    maildir: PathBuf,
}

impl Drop for Smtp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

impl Smtp {
    fn start(dir: &Path) -> Smtp {
        let maildir = dir.join("maildir");
        let port = free_port();
        // Debian's python3 first: a pyenv one on PATH may lack the package.
        let python = ["/usr/bin/python3", "python3"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or("python3");
        let child = std::process::Command::new(python)
            .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            .arg(&maildir)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 -m aiosmtpd (scripts/install-deps installs python3-aiosmtpd)");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "aiosmtpd did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        Smtp {
            child,
            port,
            maildir,
        }
    }

    /// Every mail received, in the order sent, as a mail client reads it: its headers
    /// (decoded, unfolded) and its decoded body, by Python's email parser.
    fn mails(&self) -> Vec<String> {
        if !self.maildir.join("new").exists() {
            return Vec::new();
        }
        let out = std::process::Command::new("/usr/bin/python3")
            .arg(root().join("orchestrator/tests/fixtures/read_maildir.py"))
            .arg(&self.maildir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mails: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        mails
            .iter()
            .map(|m| {
                let headers: Vec<String> = m["headers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| format!("{}: {}", h[0].as_str().unwrap(), h[1].as_str().unwrap()))
                    .collect();
                format!(
                    "{}\n\n{}",
                    headers.join("\n"),
                    m["body"].as_str().unwrap_or("")
                )
            })
            .collect()
    }
}

/// A webhook receiver on 127.0.0.1: answers 200 to every POST and keeps the bodies.
fn webhook_receiver() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_ok() {
                keep.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&body).into_owned());
            }
            let _ = reader
                .get_mut()
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (port, got)
}

/// The kernel tables without their `[workload]`, which comes last, on a disk that reads at a
/// 2009 SATA disk's rate: its 120 IOPS cap makes the cold read's rate the readahead window's
/// (0.3% from boot to boot, docs/seed-regressions.md), where a file in the host's page cache
/// reads at whatever the host spares (±15% from night to night).
fn tables_without_workload() -> String {
    let tables = kernel_tables_with_host("disk = \"sata-2009\"\n");
    let at = tables
        .find("[workload]")
        .expect("kernel_tables has a [workload]");
    assert!(
        !tables[at..].contains("\n["),
        "[workload] is the last table"
    );
    tables[..at].to_owned()
}

fn series_file(dir: &Path, upstream: &Path, smtp: u16, webhook: u16) -> PathBuf {
    let path = dir.join("series.toml");
    // A 16 MiB file read cold in 6144-byte reads: about 1 s a boot.
    let seqread = dir.join("seqread.toml");
    std::fs::write(
        &seqread,
        "kind = \"sequential\"\nop = \"read\"\nblock_bytes = 6144\nbytes = 16777216\n\
         duration_ms = 5000\ndirect = false\ndrop_caches = true\n",
    )
    .unwrap();
    let text = format!(
        r#"[series]
name = "nightly-e2e"
remote = "{upstream}"
branch = "nightly"
# The demo tree itself: the nights build in the e2e tests' build directory, incrementally.
repo = "{repo}"
state_dir = "{state}"
boots = {BOOTS}
# A second look is watch_series.rs's subject; here a suspicious night (a noisy second metric)
# would only add boots.
second_look = 0

[[series.workloads]]
name = "fsync"
file = "{root}/workloads/fsync-latency.toml"
metric = "fsync_latency_p50_ms"
timeout_s = 300

[detect]
min_effect = 0.2

[notify.email]
server = "127.0.0.1"
port = {smtp}
tls = "none"
from = "firstbad <firstbad@lab.example.org>"
to = ["maintainer@example.org"]

[notify.webhook]
url = "http://127.0.0.1:{webhook}/firstbad"

[classify]
min_effect = 0.2
# The revert on top of a night's culprit is e2e.rs's subject.
revert = false
# The regression is many times the noise: the baselines' first looks decide it.
max_baseline_boots = 8

{tables}
[workload]
file = "{seqread}"
metric = "mb_s"
direction = "higher-is-better"
timeout_s = 120
"#,
        upstream = upstream.display(),
        repo = demo_tree().display(),
        state = dir.join("state").display(),
        root = root().display(),
        seqread = seqread.display(),
        tables = tables_without_workload(),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// One night: the upstream branch moves to `head`, and cron runs `firstbad watch`.
fn night(upstream: &Path, series: &Path, head: &str) -> (Option<i32>, String, String) {
    git(upstream, &["update-ref", "refs/heads/nightly", head]);
    let out = firstbad().arg("watch").arg(series).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn status(series: &Path) -> String {
    let out = firstbad()
        .args(["watch", series.to_str().unwrap(), "status"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_nightly_series_finds_the_demo_regression_and_hunts_its_culprit() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = dir.path().join("upstream.git");
    let out = std::process::Command::new("git")
        .args(["clone", "-q", "--bare", "--shared"])
        .arg(demo_tree())
        .arg(&upstream)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let smtp = Smtp::start(dir.path());
    let (webhook, posted) = webhook_receiver();
    let series = series_file(dir.path(), &upstream, smtp.port, webhook);

    let line = first_parent_line();
    let at = |c: &str| position(&line, c);
    let culprit = commit_by_subject(&demo_fact("culprit_subject"));
    let broken = commit_by_subject(&demo_fact("broken_subject"));
    let fix = commit_by_subject(&demo_fact("fix_subject"));
    let (ic, ib, ifix) = (at(&culprit), at(&broken), at(&fix));
    assert!(ib < ifix && ifix + 2 < ic && ic + 4 < line.len());
    let good = git(demo_tree(), &["rev-parse", "demo-good"]);
    // Night 1 demo-good; 2 the build break; 3 and 4 after the fix, before the culprit (4 is
    // its parent); 5 and 6 after it.
    let heads = [
        good.clone(),
        broken.clone(),
        line[ifix + 1].clone(),
        line[ic - 1].clone(),
        line[ic + 1].clone(),
        line[ic + 4].clone(),
    ];

    // Night 1: the first head is the reference; nothing to compare yet.
    let (code, stdout, stderr) = night(&upstream, &series, &heads[0]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let s = status(&series);
    assert!(s.contains(&format!("reference {}", &good[..12])), "{s}");
    assert!(
        s.contains("night   1:") && s.contains("the reference"),
        "{s}"
    );

    // Night 2: the head does not build. Recorded as such; no alarm.
    let (code, stdout, stderr) = night(&upstream, &series, &heads[1]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let s = status(&series);
    assert!(
        s.contains("night   2:") && s.contains("failed: does not build"),
        "{s}"
    );

    // Night 3: killed with kill -9 in the middle of its boots, then resumed.
    git(&upstream, &["update-ref", "refs/heads/nightly", &heads[2]]);
    let night_dir = dir.path().join("state/nights/0003");
    kill_9_when(&["watch".as_ref(), series.as_os_str()], INTO_STEP, || {
        night_dir.join("journal.sqlite").exists()
            && journal_events(&night_dir)
                .iter()
                .filter(|(k, _, _)| k == "boot-finished")
                .count()
                >= 2
    });
    let before: Vec<_> = journal_events(&night_dir)
        .into_iter()
        .filter(|(k, _, _)| k == "boot-finished")
        .collect();
    let (code, stdout, stderr) = night(&upstream, &series, &heads[2]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("resuming"), "{stderr}");
    let after: Vec<_> = journal_events(&night_dir)
        .into_iter()
        .filter(|(k, _, _)| k == "boot-finished")
        .collect();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "a finished boot was redone"
    );
    let measured = after
        .iter()
        .filter(|(_, _, b)| b["outcome"]["status"] == "measured")
        .count();
    assert_eq!(measured, 2 * BOOTS, "every boot measured once: {after:?}");
    // The second workload's boots, after the series' own.
    let fsync_boots = journal_events(&night_dir.join("workloads/fsync"))
        .into_iter()
        .filter(|(k, _, b)| k == "boot-finished" && b["outcome"]["status"] == "measured")
        .count();
    assert_eq!(fsync_boots, 2 * BOOTS, "the fsync workload's boots");

    // Night 4: the culprit's parent. Nights 1-4 raise no alarm; the reference stays.
    let (code, stdout, stderr) = night(&upstream, &series, &heads[3]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let s = status(&series);
    assert!(!s.contains("change #"), "no alarm on a quiet night: {s}");
    assert!(s.contains(&format!("reference {}", &good[..12])), "{s}");
    assert!(smtp.mails().is_empty());

    // Night 5: the first head past the culprit: tonight's alarm, and the accumulating test
    // confirms the regression on it (its effect is many times the noise), placed at night 5:
    // between night 4's head and night 5's, which the automatic hunt bisects in that cycle.
    let (code, stdout, stderr) = night(&upstream, &series, &heads[4]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("alarm"), "{stderr}");
    let s = status(&series);
    assert!(
        s.contains("change #1: night 5, +")
            && s.contains(&format!(
                "regression of fsync/fsync_latency_p50_ms between {} and {}",
                &heads[3][..12],
                &heads[4][..12]
            )),
        "{s}"
    );
    assert!(
        s.contains(&format!("culprit {}, confirmed", &culprit[..12])),
        "{s}\n{stderr}"
    );

    // Two mails in one thread: the regression detected, then its culprit with the report.
    let mails = smtp.mails();
    assert_eq!(mails.len(), 2, "{mails:#?}");
    let (detected, found) = (&mails[0], &mails[1]);
    assert!(detected.contains("since night 5"), "{detected}");
    assert!(
        detected.contains("To: maintainer@example.org"),
        "{detected}"
    );
    assert!(
        found.contains(&format!("culprit {}", &culprit[..12])),
        "{found}"
    );
    assert!(found.contains("In-Reply-To:"), "{found}");
    assert!(
        found.contains(&demo_fact("culprit_subject")),
        "the email report: {found}"
    );
    let posted = posted.lock().unwrap().clone();
    assert_eq!(posted.len(), 2, "{posted:#?}");
    assert!(posted[1].contains(&culprit), "{}", posted[1]);

    // Night 6: still slow against the reference, the same regression: no second one, no
    // second hunt, nobody told again.
    let (code, stdout, stderr) = night(&upstream, &series, &heads[5]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let s = status(&series);
    assert!(!s.contains("change #2"), "{s}");
    assert_eq!(smtp.mails().len(), 2);
    assert!(!dir.path().join("state/hunts/002").exists());

    // The dashboard links the regression to its hunt's report.
    let dash = dir.path().join("dashboard");
    let out = firstbad()
        .args(["dashboard", series.to_str().unwrap(), "--out"])
        .arg(&dash)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let index = std::fs::read_to_string(dash.join("index.html")).unwrap();
    for plot in ["<h2>mb_s</h2>", "<h2>fsync/fsync_latency_p50_ms</h2>"] {
        assert!(index.contains(plot), "{plot}: {index}");
    }
    assert!(
        index.contains("<a href=\"hunt-001.html\">report</a>"),
        "{index}"
    );
    let report = std::fs::read_to_string(dash.join("hunt-001.html")).unwrap();
    assert!(report.contains(&culprit[..12]), "the hunt's report");
    keep_if_asked(dir);
}
