//! `firstbad watch` without kernels: the series file's errors, the fetch of a followed branch
//! from a real git repository, the sample systemd units checked by systemd itself, and the
//! command line. The nights on real kernels are in tests/watch.rs.

mod common;
use common::{git_ok, git_str};
use firstbad::config::SeriesConfig;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// A series file in `dir` with `series` as its `[series]` body and the demo's kernel tables.
fn series_file(dir: &Path, series: &str, extra: &str) -> PathBuf {
    let path = dir.join("series.toml");
    let text = format!(
        r#"[series]
{series}

{extra}

[build]
config = "{root}/configs/kernel/qemu-x86_64.config"

[[hosts]]
kind = "qemu"

[workload]
file = "{root}/workloads/fsync-latency.toml"
metric = "fsync_latency_p50_ms"
"#,
        root = root().display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn error_of(dir: &Path, series: &str, extra: &str) -> String {
    let path = series_file(dir, series, extra);
    SeriesConfig::load(&path).unwrap_err().to_string()
}

const OK: &str = r#"name = "s"
remote = "/srv/git/linux"
repo = "/tmp/linux""#;

#[test]
fn a_bad_series_file_names_the_file_the_field_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &[&str])] = &[
        (
            &format!("{OK}\nboots = 1"),
            "",
            &["series.toml: series.boots: 1 is out of range"],
        ),
        (&format!("{OK}\nboots = 100000"), "", &["series.boots"]),
        ("name = \"s\"\nrepo = \"/tmp/x\"", "", &["series", "remote"]),
        (
            &format!("{OK}\nbranch = \"a b\""),
            "",
            &["series.branch", "not a branch name"],
        ),
        (&format!("{OK}\ncolour = 1"), "", &["series", "colour"]),
        (
            "name = \"bad name\"\nremote = \"/x\"\nrepo = \"/y\"",
            "",
            &["series.name"],
        ),
        (
            OK,
            "[detect]\nmin_effect = 0",
            &["detect.min_effect", "out of range"],
        ),
        (OK, "[detect]\nwindow = 2", &["detect.window"]),
        (
            OK,
            "[hunt]\nname = \"x\"",
            &["hunt: a series has no [hunt]"],
        ),
        (OK, "[classify]\nalpha = 2.0", &["classify.alpha"]),
    ];
    for (series, extra, wanted) in cases {
        let e = error_of(dir.path(), series, extra);
        for w in *wanted {
            assert!(e.contains(w), "{w:?} in {e:?} for {series:?} {extra:?}");
        }
        assert!(e.contains("series.toml"), "names the file: {e}");
    }
}

#[test]
fn the_sample_series_file_is_valid() {
    let cfg = SeriesConfig::load(&root().join("configs/nightly.toml")).unwrap();
    assert_eq!(cfg.boots, 4);
    assert_eq!(cfg.branch, "master");
    assert_eq!(cfg.detect.window, 50, "Otava's default window");
    assert_eq!(
        cfg.detect.max_p_value, 0.001,
        "Otava's default significance"
    );
}

#[test]
fn fetch_follows_the_branch_of_a_path_remote_into_a_new_repository() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = dir.path().join("upstream");
    std::fs::create_dir(&upstream).unwrap();
    git_ok(&upstream, &["init", "-q", "-b", "main"]);
    std::fs::write(upstream.join("f"), "1").unwrap();
    git_ok(&upstream, &["add", "f"]);
    git_ok(&upstream, &["commit", "-q", "-m", "one"]);
    let one = git_str(&upstream, &["rev-parse", "HEAD"]);
    let local = dir.path().join("local");
    let up = upstream.to_str().unwrap();
    assert_eq!(
        firstbad::watch::fetch::fetch(&local, up, "main").unwrap(),
        one
    );
    std::fs::write(upstream.join("f"), "2").unwrap();
    git_ok(&upstream, &["commit", "-q", "-am", "two"]);
    let two = git_str(&upstream, &["rev-parse", "HEAD"]);
    assert_eq!(
        firstbad::watch::fetch::fetch(&local, up, "main").unwrap(),
        two
    );
    // The commit is there to build: a worktree of the local repository can check it out.
    assert_eq!(git_str(&local, &["cat-file", "-t", &two]), "commit");
    let e = firstbad::watch::fetch::fetch(&local, up, "nope").unwrap_err();
    assert!(e.contains("nope"), "{e}");
}

// Issue 21 item 1: the sample unit and timer, checked by systemd's own verifier (these machines
// do not run systemd as PID 1, but `systemd-analyze verify` reads unit files all the same).
#[test]
fn the_sample_systemd_unit_and_timer_pass_systemd_analyze_verify() {
    let dir = tempfile::tempdir().unwrap();
    let firstbad = env!("CARGO_BIN_EXE_firstbad");
    for (from, to) in [
        ("firstbad-watch@.service", "firstbad-watch@demo.service"),
        ("firstbad-watch@.timer", "firstbad-watch@demo.timer"),
    ] {
        let text = std::fs::read_to_string(root().join("configs/systemd").join(from)).unwrap();
        // The installed path, replaced by the binary under test so that verify can find it.
        let text = text.replace("/usr/local/bin/firstbad", firstbad);
        std::fs::write(dir.path().join(to), text).unwrap();
    }
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(dir.path().join("firstbad-watch@demo.service"))
        .arg(dir.path().join("firstbad-watch@demo.timer"))
        .output()
        .expect("systemd-analyze runs (scripts/install-deps installs systemd)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("firstbad-watch"),
        "systemd-analyze found fault with the units: {stderr}"
    );
}

#[test]
fn watch_every_takes_a_duration_and_refuses_nonsense() {
    let out = Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .args(["watch", "x.toml", "--every", "soon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unit"));
    let d = firstbad::watch::cli::duration;
    assert_eq!(d("24h").unwrap().as_secs(), 86_400);
    assert_eq!(d("90s").unwrap().as_secs(), 90);
    assert_eq!(d("30m").unwrap().as_secs(), 1800);
    assert!(d("0h").is_err());
}
