//! Nightly regression hunts end to end, on real parts: an "upstream" repository made from the
//! demo tree whose branch advances night by night, `firstbad watch` run once a night as cron
//! would run it, real kernel builds (shared with the other e2e tests through the build cache),
//! real qemu boots under TCG, the real agent and SQLite.
//!
//! The nights: 1 sets the reference (demo-good); 2's head is the demo's build break (a failed
//! night, recorded, no alarm); 3's head is the culprit's parent (quiet, killed with `kill -9`
//! in the middle of its boots and resumed); 4's head is just past the culprit (the alarm, and
//! the automatic hunt names the culprit).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Boots of the head and of the reference a night: what a lab spends on a nightly check.
const BOOTS: usize = 3;

fn series_file(dir: &Path, upstream: &Path) -> PathBuf {
    let path = dir.join("series.toml");
    let text = format!(
        r#"[series]
name = "nightly-e2e"
remote = "{upstream}"
branch = "nightly"
# The demo tree itself: the nights build in the e2e tests' build directory, incrementally.
repo = "{repo}"
state_dir = "{state}"
boots = {BOOTS}

[detect]
min_effect = 0.2

[classify]
min_effect = 0.2

{tables}"#,
        upstream = upstream.display(),
        repo = demo_tree().display(),
        state = dir.join("state").display(),
        tables = kernel_tables(),
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
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let series = series_file(dir.path(), &upstream);

    let line: Vec<String> = git(
        demo_tree(),
        &["rev-list", "--first-parent", "--reverse", "demo-good..demo-bad"],
    )
    .lines()
    .map(str::to_owned)
    .collect();
    let at = |c: &str| line.iter().position(|l| l == c).expect("on the first-parent line");
    let culprit = commit_by_subject(&demo_fact("culprit_subject"));
    let broken = commit_by_subject(&demo_fact("broken_subject"));
    let (ic, ib) = (at(&culprit), at(&broken));
    assert!(ib + 1 < ic && ic + 1 < line.len());
    let good = git(demo_tree(), &["rev-parse", "demo-good"]);

    // Night 1: the first head is the reference; nothing to compare yet.
    let (code, stdout, stderr) = night(&upstream, &series, &good);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(status(&series).contains(&format!("reference {}", &good[..12])));

    // Night 2: the head does not build. Recorded as such; no alarm.
    let (code, stdout, stderr) = night(&upstream, &series, &broken);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let s = status(&series);
    assert!(s.contains("night   1:") && s.contains("failed: does not build"), "{s}");

    // Night 3: the culprit's parent, killed in the middle of its boots, then resumed.
    let parent = &line[ic - 1];
    git(&upstream, &["update-ref", "refs/heads/nightly", parent]);
    let night_dir = dir.path().join("state/nights/0002");
    let mut child = firstbad()
        .arg("watch")
        .arg(&series)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        assert!(child.try_wait().unwrap().is_none(), "the night ended before the kill");
        let booted = night_dir.join("journal.sqlite").exists()
            && journal_events(&night_dir)
                .iter()
                .filter(|(k, _, _)| k == "boot-finished")
                .count()
                >= 2;
        if booted {
            break;
        }
        assert!(Instant::now() < deadline, "no boots within an hour");
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(3)); // into the next boot
    child.kill().unwrap();
    child.wait().unwrap();
    let before: Vec<_> = journal_events(&night_dir)
        .into_iter()
        .filter(|(k, _, _)| k == "boot-finished")
        .collect();
    let (code, stdout, stderr) = night(&upstream, &series, parent);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("resuming"), "{stderr}");
    let after: Vec<_> = journal_events(&night_dir)
        .into_iter()
        .filter(|(k, _, _)| k == "boot-finished")
        .collect();
    assert_eq!(&after[..before.len()], &before[..], "a finished boot was redone");
    let measured = after
        .iter()
        .filter(|(_, _, b)| b["outcome"]["status"] == "measured")
        .count();
    assert_eq!(measured, 2 * BOOTS, "every boot measured once: {after:?}");
    let s = status(&series);
    assert!(!s.contains("change #"), "no alarm on a quiet night: {s}");
    assert!(s.contains(&format!("reference {}", &parent[..12])), "{s}");

    // Night 4: just past the culprit. The alarm, then the hunt names the culprit.
    let head = &line[ic + 1];
    let (code, stdout, stderr) = night(&upstream, &series, head);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let s = status(&series);
    assert!(
        s.contains(&format!(
            "regression between {} and {}",
            &parent[..12],
            &head[..12]
        )),
        "{s}"
    );
    assert!(
        s.contains(&format!("culprit {}, confirmed", &culprit[..12])),
        "{s}\n{stderr}"
    );
    keep_if_asked(dir);
}
