//! `firstbad watch` without kernels: the series file's errors, the fetch of a followed branch
//! from a real git repository, the sample systemd units checked by systemd itself, and the
//! command line. The nights on real kernels are in tests/watch.rs.

mod common;
use common::{chromium, git_ok, git_str};
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

/// The series database of `cfg` (loaded from `path`), created in its state directory.
fn open_db(cfg: &SeriesConfig, path: &std::path::Path) -> firstbad::watch::db::SeriesDb {
    std::fs::create_dir_all(&cfg.state_dir).unwrap();
    firstbad::watch::db::SeriesDb::open(
        &firstbad::watch::db_path(&cfg.state_dir),
        firstbad::watch::meaning(cfg).unwrap(),
        path,
    )
    .unwrap()
}

/// Commit `i` of a written series: 0 is its reference, `n` the head of night `n`.
fn commit(i: usize) -> String {
    format!("{i:x}{:039x}", 0)
}

/// Sets the series' reference to commit 0, as its first cycle does.
fn set_reference(db: &mut firstbad::watch::db::SeriesDb) {
    db.record(firstbad::watch::db::SeriesEvent::Reference {
        commit: commit(0),
        why: "first".into(),
    })
    .unwrap();
}

/// Starts night `night`, its head commit `night` against the reference: the head.
fn start_night(db: &mut firstbad::watch::db::SeriesDb, night: u32) -> String {
    let head = commit(night as usize);
    db.record(firstbad::watch::db::SeriesEvent::NightStarted {
        night,
        head: head.clone(),
        reference: commit(0),
    })
    .unwrap();
    head
}

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
        // Issue 32, finding 8: read by git as an option, never as a repository.
        (
            "name = \"s\"\nremote = \"-upload-pack=touch /tmp/firstbad-pwned\"\nrepo = \"/tmp/x\"",
            "",
            &["series.remote", "begins with '-'"],
        ),
        (
            "name = \"s\"\nremote = \"ssh://-oProxyCommand=x/linux\"\nrepo = \"/tmp/x\"",
            "",
            &["series.remote", "begins with '-'"],
        ),
    ];
    for (series, extra, wanted) in cases {
        let e = error_of(dir.path(), series, extra);
        for w in *wanted {
            assert!(e.contains(w), "{w:?} in {e:?} for {series:?} {extra:?}");
        }
        assert!(e.contains("series.toml"), "names the file: {e}");
    }
}

/// Issue 36, item 4: a series of any repository's benchmark, its `[test]` table a metric
/// command hunt's. One that prints no number cannot show a slowdown, and its one metric is
/// the `[test]` one; both refused with the field and the fix. The nights themselves run on
/// this machine's timing in metric_noise.rs.
#[test]
fn a_benchmark_series_takes_a_metric_command_hunts_test_table() {
    let dir = tempfile::tempdir().unwrap();
    let write = |body: &str| {
        let path = dir.path().join("bench.toml");
        std::fs::write(
            &path,
            format!("[series]\n{OK}\n{body}\n\n[test]\nbuild = \"make\"\ncommand = \"./bench\"\n"),
        )
        .unwrap();
        path
    };
    let e = SeriesConfig::load(&write("")).unwrap_err().to_string();
    assert!(
        e.contains("bench.toml") && e.contains("test.metric") && e.contains("metric = "),
        "{e}"
    );
    let path = write("");
    let text = std::fs::read_to_string(&path).unwrap() + "metric = \"ms\"\n";
    std::fs::write(&path, &text).unwrap();
    let cfg = SeriesConfig::load(&path).unwrap();
    assert_eq!(
        cfg.metrics,
        [("ms".to_owned(), firstbad::config::Direction::LowerIsBetter)]
    );
    assert_eq!(cfg.metric(), "ms");
    let meaning = firstbad::watch::meaning(&cfg).unwrap();
    assert_eq!(meaning["test.command"], "./bench");
    assert_eq!(meaning["test.build"], "make");
    let with_metrics = text.replace(
        "[test]",
        "metrics = [{ name = \"x\", direction = \"lower-is-better\" }]\n\n[test]",
    );
    std::fs::write(&path, with_metrics).unwrap();
    let e = SeriesConfig::load(&path).unwrap_err().to_string();
    assert!(e.contains("series.metrics") && e.contains("[test]"), "{e}");
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
        firstbad::watch::fetch::fetch(&local, up, "main", &Default::default()).unwrap(),
        one
    );
    std::fs::write(upstream.join("f"), "2").unwrap();
    git_ok(&upstream, &["commit", "-q", "-am", "two"]);
    let two = git_str(&upstream, &["rev-parse", "HEAD"]);
    assert_eq!(
        firstbad::watch::fetch::fetch(&local, up, "main", &Default::default()).unwrap(),
        two
    );
    // The commit is there to build: a worktree of the local repository can check it out.
    assert_eq!(git_str(&local, &["cat-file", "-t", &two]), "commit");
    let e = firstbad::watch::fetch::fetch(&local, up, "nope", &Default::default()).unwrap_err();
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

// Issue 32, finding 8: a path remote that does not exist failed the fetch at every cycle with
// exit 5 ("the next cycle tries again"), and `--every` slept on it and tried again for ever.
// It is bad input (exit 2), said before the fetch, and `--every` does not sleep on it.
#[test]
fn a_path_remote_that_does_not_exist_exits_2_before_the_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let series = series_file(
        dir.path(),
        &format!(
            "name = \"s\"\nremote = \"no-such-repo\"\nrepo = \"{}\"",
            dir.path().join("local").display()
        ),
        "",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .args(["watch", &series.display().to_string(), "--every", "24h"])
        .env("FIRSTBAD_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Before: the cycle failed with exit 5 and `--every` slept a day to fail again.
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() && start.elapsed().as_secs() < 120 {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if child.try_wait().unwrap().is_none() {
        child.kill().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "still sleeping for the next cycle? {stderr}"
    );
    assert!(
        stderr.contains("series.toml: series.remote: ")
            && stderr.contains("no-such-repo does not exist"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("local").exists(),
        "fetched into a new repository"
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

// Issue 21 item 6. The series is written event by event as `firstbad watch` writes it (no
// kernels here: tests/watch.rs makes a real one); the page is opened in a real browser.
#[test]
fn the_dashboard_shows_every_boot_and_the_changes_in_chromium_and_exports_json() {
    use firstbad::watch::db::{RegressionState, SeriesBoot, SeriesEvent};
    let dir = tempfile::tempdir().unwrap();
    let path = series_file(
        dir.path(),
        &format!(
            "{OK}\nstate_dir = \"{}\"",
            dir.path().join("state").display()
        ),
        "",
    );
    let cfg = SeriesConfig::load(&path).unwrap();
    let mut db = open_db(&cfg, &path);
    let boot = |commit: &str, v: f64| SeriesBoot {
        commit: commit.into(),
        at_ms: 0,
        host: "qemu0".into(),
        config: "c".into(),
        value: Some(v),
        metrics: [("writer_mb_s".to_owned(), 100.0 / v)].into(),
        failed: None,
        workload: None,
    };
    set_reference(&mut db);
    for night in 1..=8u32 {
        let head = start_night(&mut db, night);
        if night == 3 {
            db.record(SeriesEvent::NightFailed {
                night,
                reason: "does not build".into(),
            })
            .unwrap();
            continue;
        }
        let level = if night >= 5 { 10.0 } else { 2.5 };
        let boots = (0..4)
            .flat_map(|k| {
                [
                    boot(&commit(0), 2.5 + k as f64 * 0.1),
                    boot(&head, level + k as f64 * 0.1),
                ]
            })
            .collect();
        db.record(SeriesEvent::NightMeasured {
            night,
            boots,
            summary: String::new(),
        })
        .unwrap();
    }
    db.record(SeriesEvent::ChangeFound {
        id: 1,
        night: 5,
        good: commit(4),
        bad: commit(5),
        effect: 3.0,
        regression: true,
        metric: String::new(),
        summary: "fsync p50 +300%".into(),
    })
    .unwrap();
    db.record(SeriesEvent::HuntEnded {
        id: 1,
        outcome: RegressionState::Found {
            culprit: commit(5),
            confirmed: true,
            probability: Some(0.97),
        },
    })
    .unwrap();
    drop(db);

    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-test");
    let run = Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .arg("dashboard")
        .arg(&path)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let page = out.join("index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    for fetch in [
        "<script", "<link", "<img", "<iframe", "@import", "url(", "src=",
    ] {
        assert!(
            !html.contains(fetch),
            "nothing fetched, nothing run: {fetch}"
        );
    }
    assert!(!html.contains("plot failed"), "every plot draws");
    let Some((dom, stderr)) = chromium(&["--dump-dom"], &page) else {
        return; // FIRSTBAD_NO_BROWSER
    };
    assert!(!stderr.contains("Uncaught"), "{stderr}");
    for want in [
        "firstbad series s",
        "fsync_latency_p50_ms: every boot, night by night",
        "writer_mb_s: every boot, night by night",
        "change #1 (+300%, culprit found)",
        "culprit found: culprit 500000000000, confirmed at 97%",
        "head did not build or boot",
        "failed: does not build",
    ] {
        assert!(dom.contains(want), "{want:?} in the rendered page");
    }
    // Kept beside the page for a person to look at.
    let shot = out.join("dashboard.png");
    let (_, stderr) = chromium(
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,1600",
        ],
        &page,
    )
    .expect("chromium ran once already");
    assert!(shot.exists(), "a screenshot: {stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("series.json")).unwrap()).unwrap();
    assert_eq!(json["schema"], "firstbad-series/1");
    assert_eq!(json["nights"].as_array().unwrap().len(), 8);
    assert_eq!(json["nights"][2]["state"], "failed");
    assert_eq!(json["nights"][0]["boots"].as_array().unwrap().len(), 8);
    assert_eq!(json["changes"][0]["culprit"], commit(5));
}

// Issue 21 item 3: an ignore list, so that a known change stops alerting.
#[test]
fn a_change_holding_a_commit_of_the_ignore_list_is_known() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git_ok(&repo, &["init", "-q", "-b", "main"]);
    let mut ids = Vec::new();
    for i in 0..4 {
        std::fs::write(repo.join("f"), i.to_string()).unwrap();
        git_ok(&repo, &["add", "f"]);
        git_ok(&repo, &["commit", "-q", "-m", &format!("c{i}")]);
        ids.push(git_str(&repo, &["rev-parse", "HEAD"]));
    }
    let series = format!(
        "name = \"s\"\nremote = \"/srv/x\"\nrepo = \"{}\"\nignore = [\"{}\", \"no-such-rev\"]",
        repo.display(),
        &ids[2][..10]
    );
    let cfg = SeriesConfig::load(&series_file(dir.path(), &series, "")).unwrap();
    let known =
        |g: usize, b: usize| firstbad::watch::detect::ignored(&cfg, &ids[g], &ids[b]).unwrap();
    assert_eq!(known(0, 3), Some(ids[2].clone()), "c2 is in (c0, c3]");
    assert_eq!(
        known(1, 2),
        Some(ids[2].clone()),
        "the bad end is in the range"
    );
    assert_eq!(known(2, 3), None, "the good end is not");
    assert_eq!(known(0, 1), None);
}

// Issue 21 item 3: several metrics moving at one change point make one regression, judged and
// hunted on the metric with the largest effect. The detector is the product's; the nights
// are written as a cycle writes them (fake boots: the kernels are in tests/watch.rs).
#[test]
fn metrics_that_move_together_make_one_regression_on_the_one_that_moved_most() {
    use firstbad::watch::db::{SeriesBoot, SeriesEvent};
    let dir = tempfile::tempdir().unwrap();
    let series = format!(
        "{OK}\nstate_dir = \"{}\"\nmetrics = [{{ name = \"writer_mb_s\", direction = \"higher-is-better\" }}]",
        dir.path().join("state").display()
    );
    let path = series_file(dir.path(), &series, "");
    let cfg = SeriesConfig::load(&path).unwrap();
    assert_eq!(cfg.metrics.len(), 2);
    let mut db = open_db(&cfg, &path);
    let boot = |commit: &str, p50: f64, mb_s: f64| SeriesBoot {
        commit: commit.into(),
        at_ms: 0,
        host: "qemu0".into(),
        config: "c".into(),
        value: Some(p50),
        metrics: [
            ("fsync_latency_p50_ms".to_owned(), p50),
            ("writer_mb_s".to_owned(), mb_s),
        ]
        .into(),
        failed: None,
        workload: None,
    };
    set_reference(&mut db);
    let mut out = firstbad::watch::Cycle::default();
    for night in 1..=6u32 {
        let head = start_night(&mut db, night);
        // From night 4 the head's fsync p50 is 30% slower and its writer 70% slower.
        let (p50, mb_s) = if night >= 4 {
            (13.0, 30.0)
        } else {
            (10.0, 100.0)
        };
        let wiggle = |k: usize| 1.0 + [0.0, 0.02, -0.02, 0.01][k];
        let boots = (0..4)
            .flat_map(|k| {
                [
                    boot(&commit(0), 10.0 * wiggle(k), 100.0 * wiggle(3 - k)),
                    boot(&head, p50 * wiggle(3 - k), mb_s * wiggle(k)),
                ]
            })
            .collect();
        db.record(SeriesEvent::NightMeasured {
            night,
            boots,
            summary: String::new(),
        })
        .unwrap();
        firstbad::watch::detect::after_night(&cfg, &mut db, &mut out).unwrap();
        let changes = &db.state.changes;
        match night {
            // So clear a move is confirmed on its own night (E-divisive and the boots agree).
            1..=3 => assert!(changes.is_empty(), "night {night}: {changes:?}"),
            _ => {
                assert_eq!(changes.len(), 1, "one change, not one per metric or night");
                let c = &changes[0];
                assert_eq!((c.night, c.regression), (4, true));
                assert_eq!(c.metric, "writer_mb_s", "the metric that moved most");
                assert!(
                    c.summary.contains("also moved: fsync_latency_p50_ms +30"),
                    "{}",
                    c.summary
                );
                let firstbad::config::HuntFile::Kernel(hunt) = firstbad::watch::hunt_of(&cfg, c)
                else {
                    panic!("a kernel series hunts kernels")
                };
                assert_eq!(hunt.workload.metric, "writer_mb_s");
                assert_eq!(
                    hunt.workload.direction,
                    firstbad::config::Direction::HigherIsBetter
                );
            }
        }
    }
}

/// `[[series.workloads]]` (issue 36, item 5): a workload measured every night besides the
/// series' own, in boots of its own, named in its metrics (`seqread/mb_s`). A night whose own
/// workload is steady and whose second one reads 8 times slower makes one regression, on the
/// second workload's metric, and its hunt measures that workload; the other workload's
/// suspicion that night asks for no second look. Pure: the boots are written
/// into the database as a night's measurement writes them (tests/watch.rs boots real kernels).
#[test]
fn a_second_workload_a_night_names_its_workload_and_metric_and_its_hunt_measures_it() {
    // The head's fsync on night 4: its sum stands at 99% of the threshold, no alarm.
    const FSYNC_MOVE: f64 = 1.04;
    use firstbad::watch::db::{SeriesBoot, SeriesEvent};
    let dir = tempfile::tempdir().unwrap();
    let series = format!(
        "{OK}\nstate_dir = \"{}\"",
        dir.path().join("state").display()
    );
    let seqread = format!(
        "[[series.workloads]]\nname = \"seqread\"\nfile = \"{}/workloads/sequential-read-bs6144.toml\"\n\
         metric = \"mb_s\"\ndirection = \"higher-is-better\"\n",
        root().display()
    );
    let path = series_file(dir.path(), &series, &seqread);
    let cfg = SeriesConfig::load(&path).unwrap();
    assert_eq!(
        cfg.metrics
            .iter()
            .map(|(m, _)| m.as_str())
            .collect::<Vec<_>>(),
        ["fsync_latency_p50_ms", "seqread/mb_s"]
    );
    let meaning = firstbad::watch::meaning(&cfg).unwrap();
    assert!(
        meaning["series.workloads.seqread"].starts_with("mb_s HigherIsBetter"),
        "{meaning:?}"
    );
    let mut db = open_db(&cfg, &path);
    let own = |commit: &str, p50: f64| SeriesBoot {
        commit: commit.into(),
        at_ms: 0,
        host: "qemu0".into(),
        config: "c".into(),
        value: Some(p50),
        metrics: [("fsync_latency_p50_ms".to_owned(), p50)].into(),
        failed: None,
        workload: None,
    };
    let read = |commit: &str, mb_s: f64| SeriesBoot {
        value: Some(mb_s),
        metrics: [("seqread/mb_s".to_owned(), mb_s)].into(),
        workload: Some("seqread".into()),
        ..own(commit, 0.0)
    };
    set_reference(&mut db);
    let mut out = firstbad::watch::Cycle::default();
    let wiggle = |k: usize| 1.0 + [0.0, 0.02, -0.02, 0.01][k];
    for night in 1..=5u32 {
        let head = start_night(&mut db, night);
        // From night 4 the head reads at 2 MB/s instead of 16; its fsync moves on night 4
        // only, by less than an alarm: suspicious on its own.
        let mb_s = if night >= 4 { 2.0 } else { 16.0 };
        let p50 = if night == 4 { 10.0 * FSYNC_MOVE } else { 10.0 };
        let boots = (0..4)
            .flat_map(|k| {
                [
                    own(&commit(0), 10.0 * wiggle(k)),
                    own(&head, p50 * wiggle(3 - k)),
                ]
            })
            .chain((0..4).flat_map(|k| {
                [
                    read(&commit(0), 16.0 * wiggle(3 - k)),
                    read(&head, mb_s * wiggle(k)),
                ]
            }))
            .collect();
        db.record(SeriesEvent::NightMeasured {
            night,
            boots,
            summary: String::new(),
        })
        .unwrap();
        // Night 4's fsync alone would ask for a second look; the read's alarm decides the
        // night, and a second look would boot both workloads again for nothing.
        assert_eq!(
            firstbad::watch::detect::suspicious(&cfg, &db.state, night),
            None,
            "night {night}"
        );
        firstbad::watch::detect::after_night(&cfg, &mut db, &mut out).unwrap();
        let n = db.state.nights.last().unwrap();
        // The series' own metric reads its own workload's boots only.
        assert_eq!(n.values(&head).len(), 4, "night {night}");
        let changes = &db.state.changes;
        if night < 4 {
            assert!(changes.is_empty(), "night {night}: {changes:?}");
            continue;
        }
        assert_eq!(changes.len(), 1, "night {night}: {changes:?}");
        let c = &changes[0];
        assert_eq!((c.night, c.regression), (4, true));
        assert_eq!(c.metric, "seqread/mb_s", "the workload and its metric");
        let firstbad::config::HuntFile::Kernel(hunt) = firstbad::watch::hunt_of(&cfg, c) else {
            panic!("a kernel series hunts kernels")
        };
        assert!(
            hunt.workload
                .file
                .ends_with("workloads/sequential-read-bs6144.toml"),
            "{:?}",
            hunt.workload.file
        );
        assert_eq!(hunt.workload.metric, "mb_s");
        assert_eq!(
            hunt.workload.direction,
            firstbad::config::Direction::HigherIsBetter
        );
    }
}

/// A bad `[[series.workloads]]` is refused with the field and the fix, as `[workload]` is.
#[test]
fn a_bad_second_workload_names_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = format!("{}/workloads/sequential-read-bs6144.toml", root().display());
    let table = |body: &str| format!("[[series.workloads]]\n{body}\n");
    let cases: Vec<(String, &[&str])> = vec![
        (
            table(&format!("file = \"{file}\"\nmetric = \"mb_s\"")),
            &["series.workloads[0].name: missing", "<name>/<metric>"],
        ),
        (
            table(&format!(
                "name = \"Seq Read\"\nfile = \"{file}\"\nmetric = \"mb_s\""
            )),
            &["series.workloads[0].name", "a-z, 0-9"],
        ),
        (
            table(&format!(
                "name = \"r\"\nfile = \"{file}\"\nmetric = \"mbs\""
            )),
            &["series.workloads[0].metric", "mb_s"],
        ),
        (
            table(&format!(
                "name = \"r\"\nfile = \"{file}\"\nmetric = \"mb_s\"\ndirection = \"up\""
            )),
            &["series.workloads[0].direction"],
        ),
        (
            table("name = \"r\"\nfile = \"/nonexistent.toml\"\nmetric = \"mb_s\""),
            &["series.workloads[0].file"],
        ),
        (
            format!(
                "{}{}",
                table(&format!(
                    "name = \"r\"\nfile = \"{file}\"\nmetric = \"mb_s\""
                )),
                table(&format!(
                    "name = \"r\"\nfile = \"{file}\"\nmetric = \"secs\""
                ))
            ),
            &["series.workloads[1].name", "two workloads"],
        ),
    ];
    for (extra, wanted) in cases {
        let e = error_of(dir.path(), OK, &extra);
        for w in wanted {
            assert!(e.contains(w), "{extra}: {e} lacks {w}");
        }
        assert!(e.contains("series.toml"), "{e}");
    }
}

/// Issue 32, finding 4: a night's failure is text from input (a build's or an agent's error),
/// and its escape sequences reached the terminal of `firstbad watch … status`.
#[test]
fn watch_status_prints_no_control_character_of_a_nights_failure() {
    use firstbad::watch::db::{SeriesEvent, SeriesState};
    let dir = tempfile::tempdir().unwrap();
    let cfg = SeriesConfig::load(&series_file(dir.path(), OK, "")).unwrap();
    let mut state = SeriesState::default();
    state.apply(
        &SeriesEvent::NightStarted {
            night: 1,
            head: "a".repeat(40),
            reference: "b".repeat(40),
        },
        0,
    );
    state.apply(
        &SeriesEvent::NightFailed {
            night: 1,
            reason: "build failed: \x1b]0;owned\x07\x1b[2J\nnext line\u{9b}".into(),
        },
        0,
    );
    let s = firstbad::watch::cli::status(&cfg, &state);
    let control: Vec<char> = s.chars().filter(|c| c.is_control() && *c != '\n').collect();
    assert!(control.is_empty(), "{control:?} in:\n{s}");
    assert!(
        s.contains(
            "night   1: aaaaaaaaaaaa vs bbbbbbbbbbbb: failed: build failed: \u{FFFD}]0;owned"
        ),
        "{s}"
    );
}

// Issue 36, item 2: a night whose boots leave the accumulating test past half its threshold
// and without an alarm asks for a second look; its boots join the night's before it is
// judged, and the change is raised sooner than without. The detector and the series
// database are the product's; the boots are written as a cycle writes them (the kernels are
// in tests/watch.rs, whose regression is too clear to leave a night in doubt).
#[test]
fn a_suspicious_night_asks_for_a_second_look_whose_boots_join_it() {
    use firstbad::watch::db::{SecondLook, SeriesBoot, SeriesEvent};
    let boot = |commit: &str, p50: f64| SeriesBoot {
        commit: commit.into(),
        at_ms: 0,
        host: "qemu0".into(),
        config: "c".into(),
        value: Some(p50),
        metrics: [("fsync_latency_p50_ms".to_owned(), p50)].into(),
        failed: None,
        workload: None,
    };
    // 10% boot noise from a fixed list; from night 6 the head is 8% slower.
    let noise = [0.0, 0.1, -0.1, 0.05, -0.05, 0.12, -0.12, 0.02];
    let night_of = |head: &str, level: f64, k0: usize| -> Vec<SeriesBoot> {
        (0..4)
            .flat_map(|k| {
                [
                    boot(&commit(0), 10.0 * (1.0 + noise[(k0 + k) % 8])),
                    boot(head, 10.0 * level * (1.0 + noise[(k0 + k + 3) % 8])),
                ]
            })
            .collect()
    };
    // The night the change is raised, and the nights that asked for a second look.
    let watch = |second_look: bool| -> (u32, Vec<u32>) {
        let dir = tempfile::tempdir().unwrap();
        let series = format!(
            "{OK}\nstate_dir = \"{}\"\nsecond_look = {}",
            dir.path().join("state").display(),
            if second_look { 4 } else { 0 }
        );
        let path = series_file(dir.path(), &series, "");
        let cfg = SeriesConfig::load(&path).unwrap();
        let mut db = open_db(&cfg, &path);
        set_reference(&mut db);
        let mut out = firstbad::watch::Cycle::default();
        let mut asked = Vec::new();
        for night in 1..=30u32 {
            let head = start_night(&mut db, night);
            let level = if night >= 6 { 1.08 } else { 1.0 };
            db.record(SeriesEvent::NightMeasured {
                night,
                boots: night_of(&head, level, night as usize),
                summary: String::new(),
            })
            .unwrap();
            // What the cycle does between a night and its judgement.
            let why = firstbad::watch::detect::suspicious(&cfg, &db.state, night);
            if let Some(why) = why.filter(|_| cfg.second_look > 0) {
                assert!(
                    night >= 6,
                    "quiet night {night} asked for a second look: {why}"
                );
                assert!(
                    why.contains("of its threshold") && why.contains("no alarm"),
                    "{why}"
                );
                asked.push(night);
                db.record(SeriesEvent::SecondLookStarted { night, why })
                    .unwrap();
                assert_eq!(
                    db.state.nights.last().unwrap().second_look,
                    SecondLook::Started
                );
                // A cycle killed here finishes this night before it fetches a new head.
                assert_eq!(db.state.unjudged_night().map(|n| n.night), Some(night));
                db.record(SeriesEvent::SecondLookMeasured {
                    night,
                    boots: night_of(&head, level, night as usize + 4),
                    summary: String::new(),
                })
                .unwrap();
                let n = db.state.nights.last().unwrap();
                assert_eq!(n.second_look, SecondLook::Measured);
                assert_eq!(
                    n.values(&head).len(),
                    8,
                    "the second look's boots joined the night's"
                );
            }
            firstbad::watch::detect::after_night(&cfg, &mut db, &mut out).unwrap();
            assert!(db.state.unjudged_night().is_none());
            if let Some(c) = db.state.changes.first() {
                assert!(c.regression && (5..=7).contains(&c.night), "{c:?}");
                let status = firstbad::watch::cli::status(&cfg, &db.state);
                assert_eq!(
                    status.matches("with a second look").count(),
                    asked.len(),
                    "{status}"
                );
                return (night, asked);
            }
        }
        panic!("no change in 30 nights: {:?}", out.lines);
    };
    let (plain, none) = watch(false);
    assert!(none.is_empty());
    let (looked, asked) = watch(true);
    eprintln!(
        "second looks on nights {asked:?}: the change raised at night {looked} (without: {plain})"
    );
    assert!(!asked.is_empty(), "no night asked for a second look");
    assert!(
        looked < plain,
        "with second looks on nights {asked:?} the change came at night {looked}, without at {plain}"
    );
}
