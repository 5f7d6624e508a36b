//! Reports of a realistic finished hunt: a real git repository made here, a journal written
//! through the journal API the way the hunt loop writes it (40 fsync samples per boot, good
//! ~5 ms, bad ~55 ms, a commit whose build fails, a failed boot), every format rendered and
//! checked for what a kernel developer reads: the culprit, the numbers, the bisect log. The
//! HTML report is opened in headless Chromium (Debian's `chromium`): it must render every
//! plot, with axes and legends, and log no console error.

mod common;
use common::chromium;
use firstbad::build::revert::RevertMade;
use firstbad::config::HuntConfig;
use firstbad::history::History;
use firstbad::hunt::HuntState;
use firstbad::journal::{
    BootOutcome, BuildOutcome, Event, HuntEnd, HuntIdentity, Journal, Recovers, Verdict,
};
use firstbad::report::{self, Commits, GitCommits, Report};
use firstbad::search::{Bisection, Next};
use std::path::{Path, PathBuf};
use std::process::Command;

const SUBJECTS: [&str; 10] = [
    "ext4: base",
    "mm: tidy page-writeback comments",
    "block: rename a local variable",
    "ext4: add a tracepoint to fsync",
    "mm/page-writeback: raise the default dirty_ratio to 40",
    "jbd2: fix a typo",
    "ext4: constify an ops table",
    "mm: small cleanup in vmscan",
    "Documentation: fix a link",
    "Linux 6.1-demo",
];
/// Index of the culprit in `SUBJECTS`.
const CULPRIT: usize = 4;
/// Index of the commit whose build fails.
const BROKEN_BUILD: usize = 2;

fn git(dir: &Path, args: &[&str], date: Option<&str>) -> String {
    let mut c = Command::new("git");
    c.current_dir(dir).args(args);
    c.env("GIT_AUTHOR_NAME", "Ann Author")
        .env("GIT_AUTHOR_EMAIL", "ann@example.org")
        .env("GIT_COMMITTER_NAME", "Ann Author")
        .env("GIT_COMMITTER_EMAIL", "ann@example.org");
    if let Some(d) = date {
        c.env("GIT_AUTHOR_DATE", d).env("GIT_COMMITTER_DATE", d);
    }
    let out = c.output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A small linear history; returns the commit ids oldest first.
fn make_repo(dir: &Path) -> Vec<String> {
    git(dir, &["init", "-q", "-b", "master"], None);
    let mut ids = Vec::new();
    for (i, s) in SUBJECTS.iter().enumerate() {
        let file = if i == CULPRIT {
            "mm/page-writeback.c"
        } else {
            "notes.txt"
        };
        std::fs::create_dir_all(dir.join("mm")).unwrap();
        let text = if i == CULPRIT {
            "int vm_dirty_ratio = 40;\nint dirty_background_ratio = 10;\n".to_owned()
        } else {
            format!("change {i}\n")
        };
        std::fs::write(dir.join(file), text).unwrap();
        git(dir, &["add", "-A"], None);
        let date = format!("2026-11-{:02}T10:00:00+0100", i + 1);
        git(dir, &["commit", "-q", "-m", s], Some(&date));
        ids.push(git(dir, &["rev-parse", "HEAD"], None));
    }
    ids
}

/// Deterministic noise in [-1, 1).
fn noise(seed: usize) -> f64 {
    let x = (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11;
    (x as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

/// A realistic fsync-latency result: 40 samples around `base` ms, a few slow ones.
fn result(base: f64, bad: bool, seed: usize) -> firstbad_wire::WorkloadResult {
    let samples: Vec<f64> = (0..40)
        .map(|i| {
            let n = noise(seed * 100 + i);
            let tail = if i % 13 == 7 { 2.5 } else { 1.0 };
            base * (1.0 + 0.15 * n) * tail
        })
        .collect();
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    let p50 = firstbad_wire::percentile(&sorted, 50.0).unwrap();
    let p99 = firstbad_wire::percentile(&sorted, 99.0).unwrap();
    let vmstat: Vec<serde_json::Value> = (0..12)
        .map(|t| {
            serde_json::json!({
                "t_s": t as f64 + 1.0, "bi": 0.0, "bo": if bad { 38000.0 } else { 21000.0 } + 900.0 * noise(seed + t),
                "us": 2.0, "sy": 20.0, "id": if bad { 18.0 } else { 50.0 }, "wa": if bad { 60.0 } else { 28.0 },
                "nr_dirty": if bad { 41000 } else { 19000 }, "nr_writeback": 1200
            })
        })
        .collect();
    // Built from JSON: the agent's result type grows optional fields (snapshot, vmstat);
    // those this build of the wire types knows are kept, others ignored.
    serde_json::from_value(serde_json::json!({
        "kind": "fsync-latency",
        "series": {"fsync_latency": {"unit": "ms", "samples": samples}},
        "metrics": {"fsync_latency_p50_ms": p50, "fsync_latency_p99_ms": p99},
        "duration_s": 14.2,
        "system": {
            "kernel_release": "6.1.0-demo",
            "cmdline": "console=ttyS0",
            "sysctls": {"vm.dirty_ratio": if bad { "40" } else { "20" }, "vm.dirty_background_ratio": "10"},
            "devices": [{"name": "vda", "scheduler": "[mq-deadline] none", "nr_requests": 256, "read_ahead_kb": 128}],
            "mem_total_kb": 1_000_000, "mem_available_kb": 900_000, "cpus": 1, "cpu_model": "QEMU Virtual CPU"
        },
        "vmstat": vmstat
    }))
    .expect("a valid WorkloadResult")
}

struct Fixture {
    _dir: tempfile::TempDir,
    cfg: HuntConfig,
    ids: Vec<String>,
}

/// The repository, a hunt file and a finished hunt's journal.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("linux");
    std::fs::create_dir(&repo).unwrap();
    let ids = make_repo(&repo);
    std::fs::write(dir.path().join("kernel.config"), "CONFIG_64BIT=y\n").unwrap();
    std::fs::write(
        dir.path().join("fsync.toml"),
        "kind = \"fsync-latency\"\nwriters = 1\nwriter_bytes = 400000000\nwriter_block_bytes = 1048576\nappend_bytes = 4096\nfsyncs = 40\ninterval_ms = 0\n",
    )
    .unwrap();
    let hunt = dir.path().join("hunt.toml");
    std::fs::write(
        &hunt,
        format!(
            "[hunt]\nname = \"dirty-ratio\"\nrepo = \"linux\"\ngood = \"{}\"\nbad = \"{}\"\n\n[build]\nconfig = \"kernel.config\"\n\n[[hosts]]\nkind = \"qemu\"\n\n[workload]\nfile = \"fsync.toml\"\nmetric = \"fsync_latency_p50_ms\"\n\n[report]\nweb_link = \"https://git.example.org/linux/commit/?id={{commit}}\"\nbisected_by = \"Bea Bisector <bea@example.org>\"\nreported_by = \"Rita Reporter <rita@example.org>\"\ncloses = \"https://bugzilla.kernel.org/show_bug.cgi?id=12309\"\n",
            ids[0],
            ids[ids.len() - 1]
        ),
    )
    .unwrap();
    let cfg = HuntConfig::load(&hunt).unwrap();
    std::fs::create_dir_all(&cfg.state_dir).unwrap();
    let j = Journal::open(&firstbad::hunt::journal_path(&cfg.state_dir)).unwrap();
    let (good, bad) = (ids[0].clone(), ids[ids.len() - 1].clone());
    j.set_identity(&HuntIdentity {
        good: good.clone(),
        bad: bad.clone(),
        fingerprint: "f".into(),
        meaning: Default::default(),
    })
    .unwrap();
    let history = History::open(&cfg.repo).unwrap();
    let dag = history
        .load_range(&bad, std::slice::from_ref(&good))
        .unwrap();
    j.append(&Event::HuntStarted {
        candidates: dag.len(),
    })
    .unwrap();
    let built = |j: &Journal, c: &str| {
        j.append(&Event::BuildStarted { commit: c.into() }).unwrap();
        j.append(&Event::BuildFinished {
            commit: c.into(),
            outcome: BuildOutcome::Built {
                kernel_release: format!("6.1.0-{}", &c[..12]),
                image: PathBuf::from("/cache/bzImage"),
                log: PathBuf::from("/cache/build.log"),
                seconds: 9.0,
                kernel_id: None,
            },
        })
        .unwrap();
    };
    let mut seed = 0;
    let mut boot = |j: &Journal, c: &str, n: u32, bad: bool| {
        seed += 1;
        j.append(&Event::BootStarted {
            commit: c.into(),
            boot: n,
            host: "qemu0".into(),
        })
        .unwrap();
        let r = result(if bad { 55.0 } else { 5.0 }, bad, seed);
        j.append(&Event::BootFinished {
            commit: c.into(),
            boot: n,
            host: "qemu0".into(),
            outcome: BootOutcome::Measured {
                kernel_release: format!("6.1.0-{}", &c[..12]),
                boot_id: format!("boot-{seed}"),
                value: r.metrics["fsync_latency_p50_ms"],
                result: r,
                console: PathBuf::from("/state/console.log"),
                boot_seconds: 3.1,
            },
        })
        .unwrap();
        // This machine's load during the boot (a local VM's): the third boot beside a busy
        // neighbour.
        j.append(&Event::BootPressure {
            commit: c.into(),
            boot: n,
            host: "qemu0".into(),
            pressure: firstbad::journal::HostPressure {
                cpu: Some(if seed == 3 { 0.62 } else { 0.04 }),
                io: Some(0.01),
                memory: Some(0.0),
                seconds: 9.5,
            },
        })
        .unwrap();
    };
    built(&j, &good);
    built(&j, &bad);
    for n in 1..=3 {
        boot(&j, &good, n, false);
        boot(&j, &bad, n, true);
    }
    j.append(&Event::BaselinesConfirmed {
        summary: "good median 5.0 ms, bad median 55.0 ms (x11.0), fully separated".into(),
        boots: Some(3),
    })
    .unwrap();
    // What `forecast.rs` journals there (its figures are its own tests'; these are the
    // report's).
    let spread = |median: f64, p90: f64| firstbad::journal::Spread { median, p90 };
    j.append(&Event::Forecast(firstbad::journal::Forecast {
        candidates: ids.len() - 1,
        effect: 10.0,
        spread: 0.05,
        effect_sigmas: 48.0,
        hunts: 100,
        right: 1.0,
        boots: spread(14.0, 16.0),
        builds: spread(4.0, 4.0),
        hours: Some(spread(0.4, 0.5)),
        boot_seconds: Some(60.0),
        build_seconds: Some(300.0),
        go: true,
        advice: Vec::new(),
        tuning: Default::default(),
    }))
    .unwrap();
    let index = |c: &str| ids.iter().position(|i| i == c).unwrap();
    let mut b = Bisection::new(&dag, &bad, std::slice::from_ref(&good)).unwrap();
    let mut failed_boot_done = false;
    let end = loop {
        match b.next() {
            Next::Found(c) => break HuntEnd::Found { commit: c },
            Next::OnlySkippedLeft(c) => break HuntEnd::OnlySkippedLeft { commits: c },
            Next::Test(c) => {
                let i = index(&c);
                let (verdict, reason) = if i == BROKEN_BUILD {
                    j.append(&Event::BuildStarted { commit: c.clone() })
                        .unwrap();
                    j.append(&Event::BuildFinished {
                        commit: c.clone(),
                        outcome: BuildOutcome::Failed {
                            log: PathBuf::from("/cache/build.log"),
                            error_lines: vec![
                                "fs/ext4/super.c:1234:5: error: 'ext4_sops' undeclared".into(),
                            ],
                        },
                    })
                    .unwrap();
                    (
                        Verdict::Skip,
                        "build failed: fs/ext4/super.c:1234:5: error: 'ext4_sops' undeclared"
                            .to_owned(),
                    )
                } else {
                    built(&j, &c);
                    let is_bad = i >= CULPRIT;
                    let mut n = 1;
                    if !failed_boot_done {
                        failed_boot_done = true;
                        j.append(&Event::BootStarted {
                            commit: c.clone(),
                            boot: 1,
                            host: "qemu0".into(),
                        })
                        .unwrap();
                        j.append(&Event::BootFinished {
                            commit: c.clone(),
                            boot: 1,
                            host: "qemu0".into(),
                            outcome: BootOutcome::Failed {
                                reason: "boot timeout after 180 s".into(),
                                console: PathBuf::from("/state/console-1.log"),
                                untestable: false,
                            },
                        })
                        .unwrap();
                        n = 2;
                    }
                    boot(&j, &c, n, is_bad);
                    boot(&j, &c, n + 1, is_bad);
                    let v = if is_bad { Verdict::Bad } else { Verdict::Good };
                    (v, format!("2 of 2 boots look {}", v.as_str()))
                };
                j.append(&Event::Verdict {
                    commit: c.clone(),
                    verdict,
                    reason,
                })
                .unwrap();
                b.mark(&c, verdict).unwrap();
            }
        }
    };
    assert_eq!(
        end,
        HuntEnd::Found {
            commit: ids[CULPRIT].clone()
        },
        "the fixture's bisection"
    );
    j.append(&Event::Confirmation {
        commit: ids[CULPRIT].clone(),
        parent: ids[CULPRIT - 1].clone(),
        confidence: Some(0.991),
        confirmed: true,
        summary: "re-test against its parent in 3 interleaved pairs: parent median 5.0, culprit \
                  median 55.0 (+1000.0%); posterior probability of the culprit 99.1% (target 95%)"
            .into(),
        // The re-test's levels: the parent at good, the culprit at bad, the whole regression.
        levels: Some(firstbad::posterior::StepLevels {
            parent: firstbad::posterior::Level {
                level: 0.02,
                lo: -0.05,
                hi: 0.09,
            },
            culprit: firstbad::posterior::Level {
                level: 0.97,
                lo: 0.9,
                hi: 1.04,
            },
            floor: 0.05,
            ratio: Some(11.0),
        }),
    })
    .unwrap();
    // The culprit reverted on top of bad by the real code on the real repository (it applies:
    // the commits after it touch other files), booted twice at good's level.
    let made = firstbad::build::revert::revert_on_top(&cfg.repo, &ids[CULPRIT], &bad);
    let RevertMade::Applied { revert } = made.clone() else {
        panic!("the fixture's revert applies: {made:?}")
    };
    j.append(&Event::RevertStarted {
        with: Vec::new(),
        commit: ids[CULPRIT].clone(),
        onto: bad.clone(),
        made,
    })
    .unwrap();
    built(&j, &revert);
    boot(&j, &revert, 1, false);
    boot(&j, &revert, 2, false);
    j.append(&Event::Reverted {
        with: Vec::new(),
        commit: ids[CULPRIT].clone(),
        revert: Some(revert.clone()),
        level: Some(firstbad::posterior::Level {
            level: 0.01,
            lo: -0.06,
            hi: 0.08,
        }),
        recovers: Recovers::All,
        summary: "revert of the culprit on top of bad, 2 interleaved round(s) beside good and \
                  bad: it recovers 99% of the regression (99% interval 92% to 106%): all of it"
            .into(),
    })
    .unwrap();
    j.append(&Event::Finished { end }).unwrap();
    Fixture {
        _dir: dir,
        cfg,
        ids,
    }
}

fn build_report(f: &Fixture) -> (Report, GitCommits, HuntIdentity, HuntState) {
    let j = Journal::open_read_only(&firstbad::hunt::journal_path(&f.cfg.state_dir)).unwrap();
    let id = j.identity().unwrap().unwrap();
    let state = HuntState::replay(&j.events().unwrap());
    let commits = GitCommits::open(&f.cfg.repo);
    let ctx = report::Context {
        name: &f.cfg.name,
        hunt_file: &f.cfg.source,
        workload_file: &f.cfg.workload.file,
        metric: &f.cfg.workload.metric,
        direction: f.cfg.workload.direction,
        settings: &f.cfg.report,
        classify: &f.cfg.classify,
        command: None,
        reproduction: false,
    };
    let r = Report::build(&ctx, &id, &state, &commits);
    (r, commits, id, state)
}

/// Whether this build of the wire types carries the agent's system snapshot and vmstat.
fn wire_has_snapshot() -> bool {
    let v = serde_json::to_value(result(5.0, false, 1)).unwrap();
    v.get("system").is_some_and(|s| !s.is_null())
}

#[test]
fn email_names_the_culprit_with_numbers_log_and_trailers() {
    let f = fixture();
    let (r, _, _, _) = build_report(&f);
    let e = report::email::email(&r);
    let oneline = format!("{} {}", &f.ids[CULPRIT][..12], SUBJECTS[CULPRIT]);
    assert!(e.contains(&oneline), "{e}");
    assert!(e.contains("Author: Ann Author <ann@example.org>"), "{e}");
    assert!(e.contains("mm/page-writeback.c | +2 -0"), "{e}");
    assert!(
        e.contains("https://git.example.org/linux/commit/?id="),
        "{e}"
    );
    assert!(
        e.contains("Reported-by: Rita Reporter <rita@example.org>"),
        "{e}"
    );
    assert!(
        e.contains("Bisected-by: Bea Bisector <bea@example.org>"),
        "{e}"
    );
    assert!(
        e.contains(&format!("git bisect start '{}' '{}'", f.ids[9], f.ids[0])),
        "{e}"
    );
    assert!(
        e.contains(&format!("# first bad commit: [{}]", f.ids[CULPRIT])),
        "{e}"
    );
    assert!(
        e.contains(&format!("git bisect skip {}", f.ids[BROKEN_BUILD])),
        "{e}"
    );
    assert!(e.contains("bootstrap"), "the interval method is named: {e}");
    assert!(e.contains("firstbad run "), "{e}");
    // The numbers: a ~11x slower median, good ~5 ms and bad ~55 ms.
    let g = r.regression.as_ref().unwrap();
    assert!((4.0..6.0).contains(&g.good.median.value), "{:?}", g.good);
    assert!((45.0..65.0).contains(&g.bad.median.value), "{:?}", g.bad);
    assert!(
        g.good.p99.value > g.good.median.value * 1.5,
        "the slow tail shows in p99"
    );
    assert!(
        g.median_ratio.low > 8.0 && g.median_ratio.high < 14.0,
        "{:?}",
        g.median_ratio
    );
    assert_eq!((g.good.boots, g.good.samples), (3, 120));
    assert!(
        e.contains(&format!("{:.2} ms [", g.bad.median.value)),
        "{e}"
    );
    assert_eq!(r.confidence.level, "high", "{:?}", r.confidence);
}

/// Issue 34: the kernel test robot's shape. Its opening names the change and the commit, its
/// table has every metric of the workload, parent against culprit, with %change and %stddev,
/// and the trailers close the bug.
#[test]
fn email_opens_as_the_kernel_test_robot_does_with_every_metric_parent_against_culprit() {
    let f = fixture();
    let (r, _, _, _) = build_report(&f);
    let e = report::email::email(&r);
    let culprit = &f.ids[CULPRIT][..12];
    let parent = &f.ids[CULPRIT - 1][..12];
    let opening = e
        .lines()
        .find(|l| l.starts_with("firstbad noticed a +"))
        .unwrap_or_else(|| panic!("no robot opening: {e}"));
    assert!(
        opening.ends_with("% regression of fsync_latency_p50_ms on:"),
        "{opening}"
    );
    assert!(
        e.contains(&format!("commit: {culprit} (\"{}\")", SUBJECTS[CULPRIT])),
        "{e}"
    );
    assert!(e.contains("testing: dirty-ratio on qemu0"), "{e}");
    assert!(
        e.contains("workload: kind=fsync-latency, writers=1,"),
        "{e}"
    );
    // The table: both commits, every metric of the workload, the hunt's first.
    let t = r.metric_table.as_ref().expect("a metric table");
    assert_eq!((&t.parent.id[..12], &t.culprit.id[..12]), (parent, culprit));
    let names: Vec<&str> = t.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["fsync_latency_p50_ms", "fsync_latency_p99_ms"]);
    let p50 = &t.rows[0];
    // ~5 ms to ~55 ms, 2 boots each, apart: moved.
    assert!(p50.change_pct > 700.0 && p50.moved, "{p50:?}");
    assert_eq!((p50.parent.boots, p50.culprit.boots), (2, 2));
    assert!(e.contains("%stddev     %change         %stddev"), "{e}");
    let row = e
        .lines()
        .find(|l| l.ends_with("[*] fsync_latency_p50_ms"))
        .unwrap_or_else(|| panic!("no p50 row: {e}"));
    assert!(row.contains(&format!("{:+.1}%", p50.change_pct)), "{row}");
    assert!(
        e.contains("Closes: https://bugzilla.kernel.org/show_bug.cgi?id=12309"),
        "{e}"
    );
    // The JSON carries the same table.
    let v: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
    assert_eq!(v["metric_table"]["rows"][0]["name"], "fsync_latency_p50_ms");
    // Issue 34, item 1: the revert on top, its words and its column, the culprit against it:
    // ~55 ms back to ~5 ms.
    let revert = r.revert.as_ref().expect("the revert on top");
    assert!(
        e.contains(&format!("Reverted on top of bad: {}.", revert.summary)),
        "{e}"
    );
    let rid = revert.revert.as_deref().expect("the revert commit");
    assert_eq!(t.revert.as_ref().map(|c| c.id.as_str()), Some(rid));
    assert!(
        p50.revert_change_pct.is_some_and(|pct| pct < -80.0),
        "{p50:?}"
    );
    assert!(
        e.contains("then the culprit against its revert on top of bad"),
        "{e}"
    );
    assert!(
        row.contains(&format!("{:+.1}%", p50.revert_change_pct.unwrap())),
        "{row}"
    );
    assert!(
        e.contains("(2 boots of the parent, 2 of the culprit, 2 of the revert)"),
        "{e}"
    );
}

#[test]
fn json_follows_the_documented_schema() {
    let f = fixture();
    let (r, _, _, _) = build_report(&f);
    let v: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
    assert_eq!(v["schema"], "firstbad-report/2");
    assert_eq!(v["confidence"]["probability"], 0.991);
    assert_eq!(v["confidence"]["confirmed"], true);
    // The culprit's share of the regression with its interval, from the journalled levels.
    let share = &v["confidence"]["culprit_share"];
    let close = |x: &serde_json::Value, y: f64| (x.as_f64().unwrap() - y).abs() < 1e-9;
    assert!(
        close(&share["value"], 0.95) && close(&share["low"], 0.81) && close(&share["high"], 1.09),
        "{share}"
    );
    // The same step in the metric's own unit (a regression of ×11: 0.97 of the way on the
    // log scale is 92% of the milliseconds, 0.02 is 0.5%).
    let in_metric = |p: f64| (11f64.powf(p.clamp(0.0, 1.0)) - 1.0) / 10.0;
    let metric = &v["confidence"]["culprit_share_in_metric"];
    assert!(
        (metric["value"].as_f64().unwrap() - (in_metric(0.97) - in_metric(0.02))).abs() < 1e-9
            && (metric["low"].as_f64().unwrap() - (in_metric(0.9) - in_metric(0.09))).abs() < 1e-9,
        "{metric}"
    );
    assert_eq!(v["confidence"]["rest"]["before"], false);
    // The revert on top (issue 34): what it recovers, with its interval, and its commit among
    // the commits, by role.
    let revert = &v["revert"];
    assert_eq!(revert["recovers"], "all", "{revert}");
    assert!(
        close(&revert["recovered"]["value"], 0.99)
            && close(&revert["recovered"]["low"], 0.92)
            && close(&revert["recovered"]["high"], 1.06),
        "{revert}"
    );
    assert_eq!(revert["culprit"], v["first_bad"]["id"]);
    let roles: Vec<&str> = v["commits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"] == revert["revert"])
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["revert-on-top"], "{revert}");
    assert_eq!(v["confidence"]["rest"]["after"], false);
    for key in v["confidence"].as_object().unwrap().keys() {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/report-schema.md"),
        )
        .unwrap();
        assert!(
            doc.contains(&format!("`{key}`")),
            "confidence.{key} undocumented"
        );
    }
    assert_eq!(v["status"], "found");
    // The forecast beside what the hunt spent after it (the fixture's boots after the
    // baselines' six).
    assert_eq!(v["forecast"]["go"], true);
    assert_eq!(v["forecast"]["boots"]["p90"], 16.0);
    let boots: usize = v["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["boots"].as_array().unwrap().len())
        .sum();
    assert_eq!(v["forecast"]["spent_boots"], boots - 6);
    assert_eq!(v["first_bad"]["id"], f.ids[CULPRIT].as_str());
    assert_eq!(v["first_bad"]["subject"], SUBJECTS[CULPRIT]);
    assert_eq!(
        v["first_bad"]["diffstat"]["files"][0]["path"],
        "mm/page-writeback.c"
    );
    let commits = v["commits"].as_array().unwrap();
    let broken = commits
        .iter()
        .find(|c| c["id"] == f.ids[BROKEN_BUILD].as_str())
        .unwrap();
    assert_eq!(broken["verdict"], "skip");
    assert_eq!(broken["build"], "failed");
    let failed_boots = commits
        .iter()
        .flat_map(|c| c["boots"].as_array().unwrap())
        .filter(|b| b["status"] == "failed")
        .count();
    assert_eq!(failed_boots, 1);
    assert_eq!(
        commits[0]["boots"][0]["samples"].as_array().unwrap().len(),
        40
    );
    // Every top-level field is documented.
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/report-schema.md"),
    )
    .unwrap();
    for key in v.as_object().unwrap().keys() {
        assert!(
            doc.contains(&format!("`{key}`")),
            "docs/report-schema.md does not document `{key}`"
        );
    }
    if wire_has_snapshot() {
        let d = v["snapshot_diff"].as_array().unwrap();
        assert!(
            d.iter().any(|d| d["setting"] == "sysctls.vm.dirty_ratio"
                && d["good"][0] == "20"
                && d["bad"][0] == "40"),
            "{d:?}"
        );
    }
}

#[test]
fn markdown_and_bisect_log_still_name_the_culprit() {
    let f = fixture();
    let (_, commits, id, state) = build_report(&f);
    let md = report::markdown(&f.cfg.name, &f.cfg.workload.metric, &id, &state, &commits);
    assert!(md.contains(SUBJECTS[CULPRIT]), "{md}");
    assert!(
        md.contains("## Forecast, made before the first candidate")
            && md.contains("- go: the culprit named in 100% of 100 simulated hunts")
            && md.contains("- spent: "),
        "{md}"
    );
    let log = report::bisect_log(&id, &state, &commits);
    assert!(
        log.ends_with(&format!(
            "# first bad commit: [{}] {}\n",
            f.ids[CULPRIT], SUBJECTS[CULPRIT]
        )),
        "{log}"
    );
}

/// Issue 56 item 3: the Markdown report gives the machine's load during the boots of a local
/// VM, and names the boot taken beside a busy neighbour with its value.
#[test]
fn markdown_lists_the_boots_taken_while_the_machine_was_busy() {
    let f = fixture();
    let (_, commits, id, state) = build_report(&f);
    let md = report::markdown(&f.cfg.name, &f.cfg.workload.metric, &id, &state, &commits);
    let at = md
        .find("## The machine's load during the boots (")
        .unwrap_or_else(|| panic!("no load section:\n{md}"));
    let section = &md[at..];
    assert!(section.contains("CPU 4%, I/O 1%, memory 0%"), "{section}");
    assert!(
        section.contains("1 boot(s) ran with a stalled share of 20% or more")
            && section.contains("cpu 62% io 1%"),
        "{section}"
    );
}

/// Issue 18, item 6: the Markdown report says whether the culprit was confirmed and with
/// what posterior probability, as the e-mail, JSON and HTML reports do; an unconfirmed
/// culprit must not read like a sure one.
#[test]
fn markdown_says_whether_the_culprit_was_confirmed_and_how_probable_it_is() {
    let f = fixture();
    let (_, commits, id, mut state) = build_report(&f);
    let md = report::markdown(&f.cfg.name, &f.cfg.workload.metric, &id, &state, &commits);
    assert!(
        md.contains("confirmation: **confirmed**") && md.contains("posterior probability 99.1%"),
        "{md}"
    );
    assert!(!md.to_lowercase().contains("not confirmed"), "{md}");
    assert!(
        md.contains("- revert on top of bad: revert of the culprit on top of bad"),
        "{md}"
    );
    // The same hunt whose final re-test did not bear the culprit out.
    let c = state.confirmation.as_mut().expect("the fixture confirms");
    c.confirmed = false;
    c.confidence = Some(0.62);
    c.summary = "re-test against its parent in 3 interleaved pairs: not ordered".into();
    let md = report::markdown(&f.cfg.name, &f.cfg.workload.metric, &id, &state, &commits);
    assert!(md.to_lowercase().contains("not confirmed"), "{md}");
    assert!(md.contains("posterior probability 62.0%"), "{md}");
    assert!(md.contains("not ordered"), "the re-test's figures: {md}");
    // A journal from before the final re-test existed says so.
    state.confirmation = None;
    let md = report::markdown(&f.cfg.name, &f.cfg.workload.metric, &id, &state, &commits);
    assert!(md.contains("confirmation: not run"), "{md}");
}

#[test]
fn status_of_a_finished_hunt_and_of_one_in_flight() {
    let f = fixture();
    let j = Journal::open_read_only(&firstbad::hunt::journal_path(&f.cfg.state_dir)).unwrap();
    let id = j.identity().unwrap().unwrap();
    let mut entries = j.events().unwrap();
    let now = entries.last().unwrap().at_ms + 5_000;
    let s = report::status::render(&f.cfg, &id, &entries, now);
    assert!(
        s.contains(&format!(
            "ended: first bad commit {}",
            &f.ids[CULPRIT][..12]
        )),
        "{s}"
    );
    assert!(
        s.contains("revert on top of bad: revert of the culprit on top of bad"),
        "{s}"
    );
    // Cut the journal in the middle of a candidate's boot: that is what a running hunt shows.
    let cut = entries
        .iter()
        .rposition(|e| matches!(&e.event, Event::BootStarted { commit, .. } if commit != &id.good && commit != &id.bad))
        .unwrap();
    entries.truncate(cut + 1);
    let s = report::status::render(&f.cfg, &id, &entries, now);
    assert!(s.contains("now: boot "), "{s}");
    assert!(s.contains("host qemu0: running boot"), "{s}");
    assert!(
        s.contains("baselines: good 3 boots, bad 3 boots (next look at 5 each)"),
        "{s}"
    );
    assert!(s.contains("expected 1..30 boots"), "{s}");
    assert!(s.contains("remaining range: "), "{s}");
    assert!(s.contains("estimated time left: ~"), "{s}");
}

/// Console messages (errors included) in Chromium's `--enable-logging=stderr` output.
fn console_messages(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect()
}

#[test]
fn html_report_renders_in_chromium_with_every_plot() {
    let f = fixture();
    let (r, commits, id, _) = build_report(&f);
    let range = commits.range(&id.good, &id.bad);
    assert_eq!(range.as_ref().map(Vec::len), Some(9));
    let html = report::html::html(&r, range.as_deref());
    assert!(!html.contains("<script"), "readable without JavaScript");
    for fetch in [
        "<script", "<link", "<img", "<iframe", "@import", "url(", "src=",
    ] {
        assert!(!html.contains(fetch), "no network fetches: {fetch}");
    }
    assert!(!html.contains("plot failed"), "every plot draws");
    // Kept where a person can look at it after the test.
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-test");
    std::fs::create_dir_all(&out).unwrap();
    let file = out.join("report.html");
    std::fs::write(&file, &html).unwrap();

    let Some((dom, stderr)) = chromium(&["--dump-dom"], &file) else {
        return;
    };
    assert_eq!(
        console_messages(&stderr),
        Vec::<&str>::new(),
        "console messages from the report"
    );
    assert!(dom.contains(SUBJECTS[CULPRIT]), "the culprit renders");
    for plot in ["plot-path", "plot-samples"] {
        let at = dom
            .find(&format!("id=\"{plot}\""))
            .unwrap_or_else(|| panic!("{plot} missing"));
        assert!(
            dom[at..]
                .trim_start_matches(|c| c != '>')
                .starts_with("><svg"),
            "{plot} has an SVG"
        );
    }
    // Axes with units, and legends.
    assert!(
        dom.contains("fsync_latency (ms, log scale)"),
        "samples y axis with unit"
    );
    assert!(dom.contains("good baseline median"), "samples legend");
    assert!(
        dom.contains("bisection step") && dom.contains("first bad commit"),
        "path axis and legend"
    );
    let svgs = dom.matches("<svg").count();
    if wire_has_snapshot() {
        assert_eq!(svgs, 6, "path, samples and four vmstat plots");
        assert!(
            dom.contains("block I/O (KiB/s)") && dom.contains("CPU time (%)"),
            "vmstat axes with units"
        );
        assert!(
            dom.contains("sysctls.vm.dirty_ratio"),
            "the setting that differs"
        );
    } else {
        assert_eq!(svgs, 2, "path and samples");
    }
    // The console check can fail: a page that logs an error is caught.
    let probe = out.join("probe.html");
    std::fs::write(
        &probe,
        "<html><body><script>console.error('probe error')</script></body></html>",
    )
    .unwrap();
    let (_, probe_err) = chromium(&["--dump-dom"], &probe).expect("chromium ran above");
    assert!(
        console_messages(&probe_err)
            .iter()
            .any(|l| l.contains("probe error")),
        "chromium's console output is not where this test looks: {probe_err}"
    );
    let shot = out.join("report.png");
    let _ = std::fs::remove_file(&shot);
    chromium(
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,2600",
            "--hide-scrollbars",
        ],
        &file,
    );
    let png = std::fs::read(&shot).expect("chromium wrote a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "a non-trivial screenshot"
    );
    eprintln!("report and screenshot in {}", out.display());
}

#[test]
fn a_hunt_in_progress_reports_without_a_culprit() {
    let f = fixture();
    let j = Journal::open_read_only(&firstbad::hunt::journal_path(&f.cfg.state_dir)).unwrap();
    let id = j.identity().unwrap().unwrap();
    let mut entries = j.events().unwrap();
    // Stop right after the first candidate's first boot started.
    let cut = entries
        .iter()
        .position(|e| matches!(&e.event, Event::BootStarted { commit, .. } if commit != &id.good && commit != &id.bad))
        .unwrap();
    entries.truncate(cut + 1);
    let state = HuntState::replay(&entries);
    let commits = GitCommits::open(&f.cfg.repo);
    let ctx = report::Context {
        name: &f.cfg.name,
        hunt_file: &f.cfg.source,
        workload_file: &f.cfg.workload.file,
        metric: &f.cfg.workload.metric,
        direction: f.cfg.workload.direction,
        settings: &f.cfg.report,
        classify: &f.cfg.classify,
        command: None,
        reproduction: false,
    };
    let r = Report::build(&ctx, &id, &state, &commits);
    assert_eq!(r.status, "in-progress");
    assert!(r.first_bad.is_none());
    assert!(
        r.status_detail
            .as_deref()
            .unwrap_or("")
            .starts_with("boot 1 of"),
        "{:?}",
        r.status_detail
    );
    assert_eq!(r.confidence.level, "low");
    assert!(r.regression.is_some(), "the baselines are measured");
    let testing = r
        .commits
        .iter()
        .find(|c| c.role == "tested")
        .expect("the candidate being tested");
    assert!(testing.verdict.is_none());
    let e = report::email::email(&r);
    assert!(e.contains("the hunt is in-progress"), "{e}");
    let html = report::html::html(&r, commits.range(&id.good, &id.bad).as_deref());
    assert!(!html.contains("plot failed"));
    assert!(html.contains("testing"));
}

/// Issue 32, finding 1: a kernel's id is input (a prebuilt kernel's is its release, read from
/// its image, or a directory's name): every id is escaped like every subject, and a plot's
/// label of a multi-byte id is cut at a character, not inside one.
#[test]
fn hostile_ids_are_escaped_in_the_html_report_and_multi_byte_ones_do_not_panic() {
    let f = fixture();
    let (mut r, commits, id, _) = build_report(&f);
    let range = commits.range(&id.good, &id.bad);
    let hostile = "6.1.0<script>alert(2)</script>";
    r.good.id = hostile.to_owned();
    r.bad.id = "6.1.0<img src=x onerror=alert(3)>".to_owned();
    for (i, c) in r.commits.iter_mut().enumerate() {
        c.id = format!("é{i}ééééé<marquee>{i}</marquee>");
    }
    let html = report::html::html(&r, range.as_deref());
    for live in ["<script", "<img", "<marquee"] {
        assert!(!html.contains(live), "{live} is live in the page");
    }
    assert!(html.contains("6.1.0&lt;script&gt;alert(2)&lt;/script&gt;"));
}

/// Issue 32, finding 4: a 100 KB subject gave a 100 KB `Subject:` line (RFC 5322: 998
/// characters a line), and the subject's escape sequences went into the report as they were.
#[test]
fn a_100_kb_subject_is_cut_in_the_email_report_and_no_line_passes_998_bytes() {
    let f = fixture();
    let (mut r, _, _, _) = build_report(&f);
    let c = r.first_bad.as_mut().expect("the fixture finds the culprit");
    c.subject = format!("mm: \x1b[2J{}", "é".repeat(50_000));
    c.oneline = format!("{} {}", &c.id[..12], c.subject);
    let email = report::email::email(&r);
    let subject = email.lines().next().expect("a first line");
    assert!(
        subject.starts_with("Subject: [REGRESSION] mm: \u{FFFD}[2Jééé"),
        "{subject}"
    );
    assert!(
        subject.chars().count() < 200,
        "{} characters",
        subject.chars().count()
    );
    for line in email.lines() {
        assert!(line.len() <= 998, "a line of {} bytes", line.len());
    }
    assert!(!email.contains('\x1b'));
}

/// Issue 34: `firstbad report --bundle DIR` writes what a maintainer reruns the conviction
/// with: a hunt file of the culprit and its parent that loads as one, the kernel config, the
/// workload, the script and the e-mail report, in DIR and in DIR.tar.
/// Exit 1, "an unexpected error" (docs: the exit codes), has a test of its own (issue 30): a
/// report whose file cannot be written (here a directory) names the file and the cause, and
/// nothing else of the hunt changes.
#[test]
fn a_report_that_cannot_be_written_exits_1_and_names_the_file() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let journal = firstbad::hunt::journal_path(&f.cfg.state_dir);
    let before = std::fs::read(&journal).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .args(["report", f.cfg.source.to_str().unwrap(), "--output"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "firstbad: error: writing {}",
            dir.path().display()
        )) && stderr.contains("directory"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        before,
        "the journal untouched"
    );
}

#[test]
fn a_reproduce_bundle_holds_a_hunt_file_of_the_culprit_and_its_parent_that_loads() {
    let f = fixture();
    let out_dir = tempfile::tempdir().unwrap();
    let dir = out_dir.path().join("dirty-ratio-bundle");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .args(["report", f.cfg.source.to_str().unwrap(), "--bundle"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let cfg = HuntConfig::load(&dir.join("hunt.toml")).unwrap();
    assert_eq!(cfg.name, "dirty-ratio-reproduce");
    assert_eq!(cfg.goods, [f.ids[CULPRIT - 1].clone()]);
    assert_eq!(cfg.bad, f.ids[CULPRIT]);
    assert_eq!(cfg.repo, f.cfg.repo, "the repository as the hunt had it");
    assert!(cfg.state_dir.starts_with(&dir), "{:?}", cfg.state_dir);
    // The hunt's other settings kept.
    assert_eq!(cfg.report.bisected_by, f.cfg.report.bisected_by);
    assert_eq!(
        std::fs::read_to_string(dir.join("kernel.config")).unwrap(),
        "CONFIG_64BIT=y\n"
    );
    assert!(std::fs::read_to_string(dir.join("workload.toml"))
        .unwrap()
        .contains("kind = \"fsync-latency\""));
    let script = std::fs::read_to_string(dir.join("reproduce.sh")).unwrap();
    assert!(
        script.contains("exec firstbad reproduce hunt.toml"),
        "{script}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.join("reproduce.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "executable");
    assert!(std::fs::read_to_string(dir.join("report.txt"))
        .unwrap()
        .contains("firstbad noticed a +"));
    let listing = std::process::Command::new("tar")
        .arg("-tf")
        .arg(out_dir.path().join("dirty-ratio-bundle.tar"))
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    for name in [
        "hunt.toml",
        "kernel.config",
        "workload.toml",
        "reproduce.sh",
        "report.txt",
    ] {
        assert!(
            listing.contains(&format!("dirty-ratio-bundle/{name}")),
            "{listing}"
        );
    }
}

/// `firstbad report` with `args` on the fixture's hunt file: its exit code and stderr.
fn firstbad_report(f: &Fixture, args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_firstbad"))
        .arg("report")
        .arg(&f.cfg.source)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 61, finding 1: `--bundle .` in the hunt's directory replaced the operator's hunt.toml
/// and truncated kernel.config to 0 bytes, `--bundle workloads` truncated the workload file
/// (`fs::copy` onto itself), and links in DIR and at DIR.tar were followed; all exit 0. A
/// bundle is made in a new directory, its files and DIR.tar created new, through no link.
#[test]
fn a_bundle_is_made_in_a_new_directory_and_never_writes_through_what_is_there() {
    let f = fixture();
    let home = f.cfg.source.parent().unwrap().to_owned();
    let files = ["hunt.toml", "kernel.config", "fsync.toml"];
    let before: Vec<Vec<u8>> = files
        .iter()
        .map(|n| std::fs::read(home.join(n)).unwrap())
        .collect();
    let unchanged = |what: &str| {
        for (n, b) in files.iter().zip(&before) {
            assert_eq!(
                &std::fs::read(home.join(n)).unwrap(),
                b,
                "{what}: {n} changed"
            );
        }
    };
    // The hunt's own directory, which holds the hunt file, the config and the workload.
    let (code, stderr) = firstbad_report(&f, &["--bundle".as_ref(), home.as_os_str()]);
    assert_eq!(code, Some(2), "--bundle <the hunt's directory>: {stderr}");
    assert!(
        stderr.contains(&home.display().to_string()) && stderr.contains("exists"),
        "{stderr}"
    );
    unchanged("--bundle <the hunt's directory>");
    // A link to a directory is an existing DIR too.
    let link = home.join("linked-bundle");
    std::os::unix::fs::symlink(&home, &link).unwrap();
    let (code, stderr) = firstbad_report(&f, &["--bundle".as_ref(), link.as_os_str()]);
    assert_eq!(code, Some(2), "--bundle <a link to a directory>: {stderr}");
    unchanged("--bundle <a link to a directory>");
    // DIR.tar a link to someone's file: refused, the file untouched, no DIR left behind.
    let victim = home.join("victim.txt");
    std::fs::write(&victim, "keep me\n").unwrap();
    let dir = home.join("new-bundle");
    std::os::unix::fs::symlink(&victim, home.join("new-bundle.tar")).unwrap();
    let (code, stderr) = firstbad_report(&f, &["--bundle".as_ref(), dir.as_os_str()]);
    assert_eq!(code, Some(2), "DIR.tar a link: {stderr}");
    assert!(stderr.contains("new-bundle.tar"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
    assert!(
        !dir.exists(),
        "a half-made bundle left in {}",
        dir.display()
    );
    // A new directory still gets the whole bundle.
    let dir = home.join("fresh-bundle");
    let (code, stderr) = firstbad_report(&f, &["--bundle".as_ref(), dir.as_os_str()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(dir.join("hunt.toml").is_file() && home.join("fresh-bundle.tar").is_file());
    unchanged("a new bundle");
}

/// The hunt file `name` in `dir`, the fixture's hunt with `workload` as its workload file and
/// `hosts` as its `[[hosts]]`, loaded.
fn hunt_variant(f: &Fixture, dir: &Path, name: &str, workload: &Path, hosts: &str) -> HuntConfig {
    let home = f.cfg.source.parent().unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "[hunt]\nname = \"dirty-ratio\"\nrepo = {:?}\ngood = \"{}\"\nbad = \"{}\"\n\n\
             [build]\nconfig = {:?}\n\n{hosts}\n[workload]\nfile = {:?}\n\
             metric = \"fsync_latency_p50_ms\"\n",
            f.cfg.repo.display().to_string(),
            f.ids[0],
            f.ids[f.ids.len() - 1],
            home.join("kernel.config").display().to_string(),
            workload.display().to_string(),
        ),
    )
    .unwrap();
    HuntConfig::load(&path).unwrap()
}

/// Issue 61, finding 3: a newline in the workload file's name put shell lines into
/// reproduce.sh, which ran; one in the hunt file's path put a `[test]` table into the bundle's
/// hunt.toml; a workload named `kernel.config` replaced the bundle's kernel config; an IPMI
/// password in `[[hosts]]` went into the file meant for sharing.
#[test]
fn bundle_files_hold_no_injected_line_no_collision_and_no_host_secret() {
    let f = fixture();
    let home = f.cfg.source.parent().unwrap().to_owned();
    let workload = std::fs::read_to_string(home.join("fsync.toml")).unwrap();
    let (parent, culprit) = (&f.ids[CULPRIT - 1], &f.ids[CULPRIT]);
    let odd_workload = home.join("w\ntouch INJECTED\n.toml");
    std::fs::write(&odd_workload, &workload).unwrap();
    let odd_dir = home.join("h\n[test]\ncommand = \"touch INJECTED\"\n#");
    let hosts = "[[hosts]]\nname = \"lab1\"\nkind = \"ssh\"\naddress = \"root@lab1\"\n\
                 power_cycle = \"ipmitool -H bmc1 -U admin -P hunter2 chassis power cycle\"\n\
                 console = \"ipmitool -H bmc1 -U admin -P hunter2 sol activate\"\n";
    let cfg = hunt_variant(&f, &odd_dir, "hunt.toml", &odd_workload, hosts);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("b");
    report::bundle::write(&dir, &cfg, parent, culprit, "report\n").unwrap();
    let script = std::fs::read_to_string(dir.join("reproduce.sh")).unwrap();
    for line in script.lines() {
        assert!(
            line.starts_with('#')
                || [
                    "set -e",
                    "cd \"$(dirname \"$0\")\"",
                    "exec firstbad reproduce hunt.toml \"$@\""
                ]
                .contains(&line)
                || line == "#!/bin/sh",
            "a line the bundle did not mean in reproduce.sh: {line:?}\n{script}"
        );
    }
    let text = std::fs::read_to_string(dir.join("hunt.toml")).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    assert!(
        !table.contains_key("test"),
        "a [test] table injected:\n{text}"
    );
    assert!(
        !text.contains("hunter2"),
        "the IPMI password is in the bundle:\n{text}"
    );
    assert!(
        text.contains("power_cycle"),
        "says what was left out:\n{text}"
    );
    let wl = table["workload"]["file"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(dir.join(wl)).unwrap(), workload);

    // A workload file named like a bundle file keeps both.
    let named = home.join("named");
    std::fs::create_dir(&named).unwrap();
    for name in ["kernel.config", "hunt.toml", "reproduce.sh", "report.txt"] {
        std::fs::write(named.join(name), &workload).unwrap();
        let cfg = hunt_variant(
            &f,
            &home.join(format!("h-{name}")),
            "hunt.toml",
            &named.join(name),
            "[[hosts]]\nkind = \"qemu\"\n",
        );
        let dir = out.path().join(format!("b-{name}"));
        report::bundle::write(&dir, &cfg, parent, culprit, "the report\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("kernel.config")).unwrap(),
            "CONFIG_64BIT=y\n",
            "workload {name}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("report.txt")).unwrap(),
            "the report\n"
        );
        assert!(std::fs::read_to_string(dir.join("reproduce.sh"))
            .unwrap()
            .starts_with("#!/bin/sh"));
        let table: toml::Table =
            toml::from_str(&std::fs::read_to_string(dir.join("hunt.toml")).unwrap()).unwrap();
        let wl = table["workload"]["file"].as_str().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join(wl)).unwrap(),
            workload,
            "workload {name}"
        );
    }
}

/// Issue 61, finding 7: `web_link = "javascript:…"` became a live link in the HTML report,
/// and ESC and other control bytes from subjects and a command's units reached the page raw.
/// Only an http(s) link is live; a control character is shown as U+FFFD.
#[test]
fn only_http_links_are_live_and_no_control_byte_reaches_the_html_report() {
    let f = fixture();
    let (mut r, commits, id, _) = build_report(&f);
    let range = commits.range(&id.good, &id.bad);
    let culprit = r.first_bad.as_mut().expect("the fixture's culprit");
    culprit.link = Some("javascript:alert(document.cookie)//".into());
    culprit.subject = "mm: \x1b[2J\x07\x08\u{9b}31m cleared".into();
    r.bad.subject = "bad \x1b]0;title\x07".into();
    r.metric = "ms\x1b[31m".into();
    for c in r.commits.iter_mut() {
        c.subject = format!("{}\x1b[1m\r\x0c", c.subject);
    }
    if let Some(g) = r.regression.as_mut() {
        g.unit = "ms\x1b[5m".into();
    }
    let html = report::html::html(&r, range.as_deref());
    assert!(
        !html.contains("href=\"javascript:"),
        "a javascript: link is live in the page"
    );
    assert!(
        html.contains("javascript:alert(document.cookie)//"),
        "the link shown as text"
    );
    let controls: Vec<char> = html
        .chars()
        .filter(|c| c.is_control() && !matches!(c, '\n' | '\t'))
        .collect();
    assert!(controls.is_empty(), "{controls:?} in the page");
    // An https link stays a link.
    r.first_bad.as_mut().unwrap().link = Some("https://git.example.org/c/1".into());
    let html = report::html::html(&r, range.as_deref());
    assert!(
        html.contains("<a href=\"https://git.example.org/c/1\">"),
        "the https link"
    );
}
