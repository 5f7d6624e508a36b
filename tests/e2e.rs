//! End to end on real parts: a real Linux 6.1 tree (Debian's linux-source-6.1 made into a git
//! history by scripts/make-demo-tree), real kernel builds, real qemu boots (TCG), the real
//! static agent measuring fsync latency on ext4, a real SQLite journal, and real git.
//!
//! Slow the first time on a machine (a clean kernel build is ~4.5 min on 2 cores); kernels,
//! build directories and ccache are cached under $FIRSTBAD_CACHE (default
//! ~/.cache/firstbad) so later runs take minutes. Tests that build and boot are serialised.

mod common;

use common::*;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// A hunt file in `dir` over the demo tree; builds cached machine-wide.
fn hunt_file(dir: &Path, good: &str, bad: &str) -> PathBuf {
    let hunt = dir.join("hunt.toml");
    let text = format!(
        r#"[hunt]
name = "e2e"
repo = "{repo}"
good = "{good}"
bad = "{bad}"
state_dir = "{state}"

{tables}
[classify]
# The demo is one step; a false "part left" reading on this shared machine would send the run
# on to hunt that part (issue 31), minutes of boots that are not these tests' subject: every
# step in one run is tested in metric_hunts.rs, metric_noise.rs and sim.rs.
max_culprits = 1
"#,
        repo = demo_tree().display(),
        state = dir.join("state").display(),
        tables = kernel_tables(),
    );
    std::fs::write(&hunt, text).unwrap();
    hunt
}

/// Starts `firstbad run hunt`, waits until the journal satisfies `when` (at most an hour), lets
/// the step under way run 3 s more, and kills firstbad with SIGKILL. Checks that no VM
/// outlived it, and returns the journal as the kill left it.
fn kill_9_run_when(
    hunt: &Path,
    state: &Path,
    when: impl Fn(&[(String, Option<String>, serde_json::Value)]) -> bool,
) -> Vec<(String, Option<String>, serde_json::Value)> {
    kill_9_when(&["run".as_ref(), hunt.as_os_str()], INTO_STEP, || {
        state.join("journal.sqlite").exists() && when(&journal_events(state))
    });
    journal_events(state)
}

/// Runs `firstbad run hunt` (a resume) to its end: it must succeed and name `culprit`.
/// Returns its stdout and stderr.
fn rerun_to_the_culprit(hunt: &Path, culprit: &str) -> (String, String) {
    let out = firstbad().arg("run").arg(hunt).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "rerun failed: {}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains(&format!("first bad commit: {}", &culprit[..12])),
        "wrong culprit, expected {culprit}: {stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// The spine: firstbad finds the injected ext4 fsync regression in a real kernel tree,
/// skipping the commit that does not build, and a `kill -9` in the middle of a boot loses
/// nothing: the rerun gives the same culprit without rebuilding or re-measuring finished
/// steps, and its `git bisect log` replays in git itself.
#[test]
fn bisects_the_demo_kernel_to_the_fsync_regression_across_a_kill_9() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let culprit = commit_by_subject(&demo_fact("culprit_subject"));
    let broken = commit_by_subject(&demo_fact("broken_subject"));
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "demo-good", "demo-bad");
    let state = dir.path().join("state");

    // First run: kill -9 in a boot of the baselines, once four have finished.
    let before = kill_9_run_when(&hunt, &state, |events| {
        events
            .iter()
            .filter(|(k, _, _)| k == "boot-finished")
            .count()
            >= 4
            && events.last().is_some_and(|(k, _, _)| k == "boot-started")
    });
    assert!(
        !before.iter().any(|(k, _, _)| k == "baselines-confirmed"),
        "the first kill came in the baselines"
    );

    // Second run: kill -9 again, in the first boot that follows the first verdict (the drift
    // check's: the demo's search boots no candidate, every verdict comes from the kernel's
    // identity or the broken build).
    let second = kill_9_run_when(&hunt, &state, |events| {
        let first_verdict = events.iter().position(|(k, _, _)| k == "verdict");
        first_verdict.is_some_and(|i| {
            events[i..].iter().any(|(k, _, _)| k == "boot-started")
                && events.last().is_some_and(|(k, _, _)| k == "boot-started")
        })
    });

    // Rerun: resumes to the end.
    let (stdout, stderr) = rerun_to_the_culprit(&hunt, &culprit);
    assert!(stderr.contains("resuming"), "{stderr}");

    let events = journal_events(&state);
    // Nothing finished before the kill was done again.
    let mut builds = std::collections::HashSet::new();
    let mut boots = std::collections::HashSet::new();
    for (kind, commit, body) in &events {
        let commit = commit.clone().unwrap_or_default();
        if kind == "build-finished" {
            assert!(builds.insert(commit.clone()), "{commit} built twice");
        }
        if kind == "boot-finished" {
            let n = body["boot"].as_u64().unwrap();
            assert!(
                boots.insert((commit.clone(), n)),
                "boot {n} of {commit} measured twice"
            );
        }
    }
    for (kind, commit, _) in &events[before.len()..] {
        if kind == "build-started" {
            let c = commit.as_deref().unwrap();
            assert!(
                !before
                    .iter()
                    .any(|(k, bc, _)| k == "build-finished" && bc.as_deref() == Some(c)),
                "{c} was rebuilt after the resume"
            );
        }
    }
    let endpoints = [
        git(demo_tree(), &["rev-parse", "demo-good^{commit}"]),
        git(demo_tree(), &["rev-parse", "demo-bad^{commit}"]),
    ];
    // Issue 35: the commits that change no file the endpoints' builds read (drivers not in
    // the config, documentation) were decided before the first candidate, journalled with
    // why, and never built or booted but for the culprit's parent, built for its identity; the
    // culprit and the build-breaking commit stay.
    let pruned: Vec<(String, String)> = events
        .iter()
        .filter(|(k, _, _)| k == "pruned")
        .flat_map(|(_, _, b)| b["links"].as_array().cloned().unwrap_or_default())
        .filter(|l| l["nth"] == 0)
        // The bad endpoint (a comment in a driver not built) is booted as an endpoint.
        .filter(|l| !endpoints.iter().any(|e| l["commit"] == e.as_str()))
        .map(|l| {
            (
                l["commit"].as_str().unwrap().to_owned(),
                l["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        pruned.len() >= 20,
        "the demo range's comment fixes in drivers not built: {pruned:?}"
    );
    for c in [&culprit, &broken] {
        assert!(!pruned.iter().any(|(p, _)| p == c), "{c} was pruned");
    }
    // The confirmation is of the culprit's own first parent, left out of the search or not: a
    // maintainer reads "against its parent" as that commit.
    let retest_parent = events
        .iter()
        .find(|(k, _, _)| k == "confirmation")
        .and_then(|(_, _, b)| b["parent"].as_str().map(str::to_owned));
    for (p, why) in &pruned {
        assert!(
            why.starts_with("touches only") || why == "changes no file",
            "{why}"
        );
        if retest_parent.as_deref() == Some(p.as_str()) {
            continue;
        }
        assert!(
            !events
                .iter()
                .any(|(k, c, _)| (k == "build-started" || k == "boot-started")
                    && c.as_deref() == Some(p.as_str())),
            "pruned {p} was built or booted"
        );
    }
    // The broken commit was tested and skipped as a build failure, never called good or bad.
    let broken_verdict = events
        .iter()
        .find(|(k, c, _)| k == "verdict" && c.as_deref() == Some(broken.as_str()))
        .expect("the bisection visits the build-breaking commit");
    assert_eq!(broken_verdict.2["verdict"], "skip");
    assert!(
        broken_verdict.2["reason"]
            .as_str()
            .unwrap()
            .contains("build failed"),
        "{:?}",
        broken_verdict.2
    );
    // Issue 35, item 2: a candidate that built the kernel of an endpoint or of a judged
    // commit (a comment fixed in a file the config builds) took that verdict unbooted, and
    // it is the right one: bad from the culprit on, good before it.
    let shared: Vec<(&str, &str)> = events
        .iter()
        .filter(|(k, _, b)| {
            k == "verdict"
                && b["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("the same kernel as"))
        })
        .map(|(_, c, b)| (c.as_deref().unwrap(), b["verdict"].as_str().unwrap()))
        .collect();
    for (c, verdict) in &shared {
        let after = Command::new("git")
            .arg("-C")
            .arg(demo_tree())
            .args(["merge-base", "--is-ancestor", &culprit, c])
            .status()
            .unwrap()
            .success();
        assert_eq!(*verdict, if after { "bad" } else { "good" }, "{c}");
    }
    // The demo range's comment fixes in built files (fs/pnode.c, fs/namespace.c) build the
    // good endpoint's kernel, and the culprit the bad endpoint's.
    assert!(!shared.is_empty(), "no verdict from an identical kernel");
    eprintln!("verdicts shared with an identical kernel: {shared:?}");
    // The culprit builds bad's kernel: bad by identity, unbooted.
    assert!(
        shared.iter().any(|(c, v)| *c == culprit && *v == "bad"),
        "{shared:?}"
    );
    // The bad endpoint was measured with every per-boot sample kept, on its own kernel.
    let bad_boot = events
        .iter()
        .find(|(k, c, _)| k == "boot-finished" && c.as_deref() == Some(endpoints[1].as_str()))
        .expect("the bad endpoint was booted");
    let samples = &bad_boot.2["outcome"]["result"]["series"]["fsync_latency"]["samples"];
    assert_eq!(
        samples.as_array().unwrap().len(),
        40,
        "every fsync sample is kept"
    );
    let rel = bad_boot.2["outcome"]["kernel_release"].as_str().unwrap();
    assert!(
        rel.ends_with(&format!("-fb{}", &endpoints[1][..12])),
        "booted {rel}"
    );

    eprintln!(
        "one-host hunt: {} verdicts, {} candidate boots, {} rounds of candidate boots; seconds \
         (endpoints, search, re-test, with the kill): {:?}",
        events.iter().filter(|(k, _, _)| k == "verdict").count(),
        events
            .iter()
            .filter(|(k, c, _)| {
                k == "boot-finished" && !endpoints.iter().any(|e| Some(e.as_str()) == c.as_deref())
            })
            .count(),
        candidate_rounds(&events, &endpoints),
        phase_seconds(&state)
    );
    // The statistics: baselines confirmed at a look, the host checked for drift, and the
    // culprit confirmed against its parent and stated with its posterior probability.
    let confirmed = events
        .iter()
        .find(|(k, _, _)| k == "baselines-confirmed")
        .expect("baselines confirmed");
    // At the first look (5 boots a side) when every boot of bad is above every boot of good;
    // at 8 when a stray boot of the host mixed them.
    assert!(
        matches!(confirmed.2["boots"].as_u64(), Some(5 | 8)),
        "{:?}",
        confirmed.2
    );
    // The forecast was made once the baselines were in, before the first verdict, and is a
    // go (docs/forecast.md).
    let at = |kind: &str| events.iter().position(|(k, _, _)| k == kind);
    let forecast = at("forecast").expect("a forecast once the baselines were in");
    assert!(at("baselines-confirmed") < Some(forecast) && Some(forecast) < at("verdict"));
    assert_eq!(events[forecast].2["go"], true, "{:?}", events[forecast].2);
    assert!(
        events
            .iter()
            .any(|(k, _, b)| k == "drift-check" && b["drifted"] == false),
        "the good endpoint was re-measured during the hunt"
    );
    let confirmation = events
        .iter()
        .find(|(k, _, _)| k == "confirmation")
        .expect("the culprit was confirmed against its parent");
    assert_eq!(confirmation.2["confirmed"], true, "{:?}", confirmation.2);
    // A one-step regression states its probability (issue 38: CI once saw `confirmed: true`
    // with no confidence, and the unwrap here lost the summary that said why).
    let confidence = confirmation.2["confidence"].as_f64().unwrap_or_else(|| {
        panic!(
            "the confirmation states no probability: {}",
            confirmation.2["summary"]
        )
    });
    assert!(confidence >= 0.95, "{:?}", confirmation.2);
    // The demo's culprit builds bad's kernel and its parent good's: the step is the whole
    // regression, kernel for kernel, and no re-test boots good against bad again (#31 item 5;
    // the rounds of a re-test are tests/engine.rs's and the two-step test's below).
    assert!(
        stdout.contains("confirmed: no re-test: the parent"),
        "{stdout}"
    );
    assert!(
        !events.iter().any(|(k, _, _)| k == "confirm-started"),
        "a re-test ran"
    );
    // And how much of the regression the culprit's step is: all of it, by identity (the
    // journal's levels: the parent at good, the culprit at bad).
    assert!(
        stdout.contains("the step from one to the other is the whole regression"),
        "{stdout}"
    );
    let levels = &confirmation.2["levels"];
    assert_eq!(
        (
            levels["parent"]["level"].as_f64(),
            levels["culprit"]["level"].as_f64()
        ),
        (Some(0.0), Some(1.0)),
        "{levels:?}"
    );

    // Issue 34: the culprit reverted on top of bad (a commit of firstbad's own, on no ref of
    // the tree) and built. The demo's range changes nothing else the kernel is built from
    // (its other built changes are comments), so the revert builds good's very kernel: it
    // recovers all of the regression, and no boot is spent on it (issue 33). The rounds of a
    // revert whose kernel is its own are tests/engine.rs's.
    let made = &events
        .iter()
        .find(|(k, _, _)| k == "revert-started")
        .expect("the confirmed culprit was reverted on top of bad")
        .2;
    assert_eq!(made["made"]["outcome"], "applied", "{made:?}");
    let revert = made["made"]["revert"].as_str().unwrap().to_owned();
    let refs = git(demo_tree(), &["for-each-ref", "--contains", &revert]);
    assert!(refs.trim().is_empty(), "a ref holds the revert: {refs}");
    assert!(
        events
            .iter()
            .any(|(k, c, _)| k == "build-finished" && c.as_deref() == Some(revert.as_str())),
        "the revert was built"
    );
    let reverted = &events
        .iter()
        .find(|(k, _, _)| k == "reverted")
        .expect("the revert's result")
        .2;
    assert_eq!(reverted["recovers"], "all", "{reverted:?}");
    assert_eq!(reverted["level"]["hi"].as_f64(), Some(0.0), "{reverted:?}");
    let summary = reverted["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("builds the kernel of the good endpoint")
            && summary.contains("not booted"),
        "{summary}"
    );
    assert!(
        !events
            .iter()
            .any(|(k, c, _)| k == "boot-started" && c.as_deref() == Some(revert.as_str())),
        "the revert was booted"
    );
    assert!(
        second.len() < events.len(),
        "the hunt went on after the second kill"
    );
    assert!(stdout.contains("reverted on top: revert of"), "{stdout}");

    // The report names the culprit and the revert's result; the log replays in git and git
    // agrees.
    let report = firstbad().arg("report").arg(&hunt).output().unwrap();
    let report = String::from_utf8_lossy(&report.stdout);
    assert!(report.contains(&demo_fact("culprit_subject")), "{report}");
    assert!(
        report.contains("revert on top of bad: revert of"),
        "{report}"
    );
    let log = firstbad().arg("log").arg(&hunt).output().unwrap();
    let log_path = dir.path().join("bisect.log");
    std::fs::write(&log_path, &log.stdout).unwrap();
    let clone = dir.path().join("clone");
    git(
        dir.path(),
        &[
            "clone",
            "-q",
            "--no-checkout",
            "--shared",
            &demo_tree().display().to_string(),
            "clone",
        ],
    );
    let replay = Command::new("git")
        .arg("-C")
        .arg(&clone)
        .args(["bisect", "replay"])
        .arg(&log_path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&replay.stdout);
    assert!(
        said.contains(&format!("{culprit} is the first bad commit")),
        "git bisect replay: {said}\n{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    keep_if_asked(dir);
}

/// Issue 6, a host pool used by parallel bisection: two qemu VMs test two candidates at once,
/// and a lab machine that is down (a real closed port on 127.0.0.1; its `power_cycle` is
/// `true` because no power controller exists here) leaves the pool with a journalled reason
/// while the hunt goes on. A `kill -9` with two boots in flight loses nothing, and the resumed
/// hunt keeps the dead host out.
#[test]
fn bisects_on_a_pool_of_two_vms_with_a_dead_lab_machine_across_a_kill_9() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let culprit = commit_by_subject(&demo_fact("culprit_subject"));
    // The pool is the subject, not the range: five commits around the culprit (after the
    // build break's fix, two past the culprit), whose kernels tests/chain.rs and the spine
    // test above have built, leave two candidates to boot at once and cost a third of the
    // demo range's boots (issue 38 item 6).
    let line = first_parent_line();
    let (ifix, ic) = (
        position(&line, &commit_by_subject(&demo_fact("fix_subject"))),
        position(&line, &culprit),
    );
    let (good, bad) = (line[ifix + 1].clone(), line[ic + 2].clone());
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let vm = |name: &str| {
        format!(
            "[[hosts]]\nname = \"{name}\"\nkind = \"qemu\"\naccel = \"tcg\"\nmemory_mb = 1024\n\
             boot_timeout_s = 240\n\n"
        )
    };
    let hunt = dir.path().join("hunt.toml");
    std::fs::write(
        &hunt,
        format!(
            r#"[hunt]
name = "e2e-pool"
repo = "{repo}"
good = "{good}"
bad = "{bad}"
state_dir = "{state}"

[build]
config = "{root}/configs/kernel/qemu-x86_64.config"
jobs = 2
# Pruning would leave the culprit the one candidate of these five commits; the pool's
# parallel candidates are the subject here.
prune = false

{vm1}{vm2}[[hosts]]
name = "lab-dead"
kind = "ssh"
address = "root@127.0.0.1:{closed_port}"
insecure_ignore_host_key = true
connect_timeout_s = 2
command_timeout_s = 5
boot_timeout_s = 5
install = "kexec"
power_cycle = "true"

[workload]
file = "{root}/workloads/fsync-latency.toml"
metric = "fsync_latency_p50_ms"
timeout_s = 300

[classify]
# Two TCG VMs share this machine's 2 cores with whatever else runs, and their fsync latency
# moves with that load (a re-measured good endpoint at 14-19 ms against a 3.4 ms baseline
# stopped an early run as drift, rightly). Drift checks are the one-host test's subject.
drift_check_every = 0
# One step: under a CPU hog a false "part left" reading sent this run on to hunt a part that
# was not there (9 min of boots); the pool is this test's subject, steps are metric_hunts.rs's.
max_culprits = 1
# The revert on top is the one-host test's subject.
revert = false
"#,
            repo = demo_tree().display(),
            state = state.display(),
            root = root().display(),
            vm1 = vm("vm1"),
            vm2 = vm("vm2"),
        ),
    )
    .unwrap();

    // First run: kill -9 while two candidate boots are in flight.
    let before = kill_9_run_when(&hunt, &state, |events| {
        let n = events.len();
        n >= 2
            && events.iter().any(|(k, _, _)| k == "verdict")
            && events[n - 2..].iter().all(|(k, _, _)| k == "boot-started")
            && events[n - 2].1 != events[n - 1].1
    });

    let (_, stderr) = rerun_to_the_culprit(&hunt, &culprit);
    assert!(
        stderr.contains("host lab-dead stays out of the pool"),
        "{stderr}"
    );

    let events = journal_events(&state);
    // The dead machine left the pool once, saying why, and was not used after the resume.
    let retired: Vec<_> = events
        .iter()
        .filter(|(k, _, _)| k == "host-retired")
        .collect();
    assert_eq!(retired.len(), 1, "{retired:?}");
    assert_eq!(retired[0].2["host"], "lab-dead");
    assert!(
        retired[0].2["reason"]
            .as_str()
            .unwrap()
            .contains("needs a person"),
        "{:?}",
        retired[0].2
    );
    assert!(
        !events[before.len()..]
            .iter()
            .any(|(k, _, b)| k == "boot-started" && b["host"] == "lab-dead"),
        "the retired host was used again after the resume"
    );
    // No boot was measured twice, and both VMs measured candidates.
    let mut boots = std::collections::HashSet::new();
    let mut hosts_of_candidates = std::collections::HashSet::new();
    let endpoints = [good.clone(), bad.clone()];
    for (kind, commit, body) in &events {
        if kind == "boot-finished" {
            let commit = commit.clone().unwrap();
            let n = body["boot"].as_u64().unwrap();
            assert!(
                boots.insert((commit.clone(), n)),
                "boot {n} of {commit} measured twice"
            );
            if !endpoints.iter().any(|e| e.trim() == commit) {
                hosts_of_candidates.insert(body["host"].as_str().unwrap().to_owned());
            }
        }
    }
    assert!(
        hosts_of_candidates.contains("vm1") && hosts_of_candidates.contains("vm2"),
        "{hosts_of_candidates:?}"
    );
    // Two different candidates were booted at the same time (both started before either
    // finished).
    let parallel = events.windows(2).any(|w| {
        w.iter().all(|(k, _, _)| k == "boot-started")
            && w[0].1 != w[1].1
            && w.iter()
                .all(|(_, c, _)| !endpoints.iter().any(|e| Some(e.trim()) == c.as_deref()))
    });
    assert!(parallel, "no two candidates were tested at once");
    let verdicts = events.iter().filter(|(k, _, _)| k == "verdict").count();
    let candidate_boots = events
        .iter()
        .filter(|(k, c, _)| {
            k == "boot-finished" && !endpoints.iter().any(|e| Some(e.trim()) == c.as_deref())
        })
        .count();
    eprintln!(
        "pool hunt: {verdicts} verdicts, {candidate_boots} candidate boots, {} rounds of \
         candidate boots, {} events; seconds (endpoints, search, re-test, with the kill): {:?}",
        candidate_rounds(&events, &endpoints),
        events.len(),
        phase_seconds(&state)
    );
    let confirmation = events
        .iter()
        .find(|(k, _, _)| k == "confirmation")
        .expect("the culprit was re-tested against its parent");
    assert_eq!(confirmation.2["confirmed"], true, "{:?}", confirmation.2);
    // The baselines were measured on both VMs, and the summary says so host by host.
    let baselines = events
        .iter()
        .find(|(k, _, _)| k == "baselines-confirmed")
        .unwrap();
    let summary = baselines.2["summary"].as_str().unwrap();
    assert!(
        summary.contains("per host:")
            && summary.contains("vm1: good")
            && summary.contains("vm2: good"),
        "{summary}"
    );
    let status = firstbad().arg("status").arg(&hunt).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("host lab-dead: left the pool: host lab-dead needs a person"),
        "{status}"
    );
    assert!(status.contains("host vm1: idle"), "{status}");
    keep_if_asked(dir);
}

/// Seconds of the hunt's phases from the journal's clock: endpoints (to the baselines'
/// confirmation), search (to the start of the final re-test), re-test (to its result).
fn phase_seconds(state: &Path) -> (f64, f64, f64) {
    let conn = Connection::open(state.join("journal.sqlite")).unwrap();
    let at = |sql: &str| -> f64 {
        conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap() as f64 / 1000.0
    };
    let start = at("SELECT min(at_ms) FROM events");
    let baselines = at("SELECT at_ms FROM events WHERE kind = 'baselines-confirmed'");
    let end = at("SELECT at_ms FROM events WHERE kind = 'confirmation'");
    // A culprit with the endpoints' kernels is confirmed without a re-test: 0 s.
    let retest = conn
        .query_row(
            "SELECT at_ms FROM events WHERE kind = 'confirm-started'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_or(end, |ms| ms as f64 / 1000.0);
    (baselines - start, retest - baselines, end - retest)
}

/// Rounds of candidate boots: runs of boot-started events of candidates with no boot-finished
/// between them (one round boots one commit per host at once).
fn candidate_rounds(
    events: &[(String, Option<String>, serde_json::Value)],
    endpoints: &[String],
) -> usize {
    let mut rounds = 0;
    let mut in_round = false;
    for (kind, commit, _) in events {
        let candidate = !endpoints
            .iter()
            .any(|e| Some(e.as_str()) == commit.as_deref());
        match kind.as_str() {
            "boot-started" if candidate && !in_round => {
                rounds += 1;
                in_round = true;
            }
            "boot-finished" => in_round = false,
            _ => {}
        }
    }
    rounds
}

fn run_expecting_bad_input(hunt: &Path) -> String {
    let out = firstbad().arg("run").arg(hunt).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_malformed_hunt_file_names_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "demo-good", "demo-bad");
    let text = std::fs::read_to_string(&hunt)
        .unwrap()
        .replace("memory_mb = 1024", "memory_mb = \"lots\"");
    std::fs::write(&hunt, text).unwrap();
    let err = run_expecting_bad_input(&hunt);
    assert!(err.contains("hunt.toml"), "{err}");
    assert!(err.contains("memory_mb"), "{err}");
}

#[test]
fn a_revision_that_does_not_exist_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "demo-good", "v9.99-no-such-tag");
    let err = run_expecting_bad_input(&hunt);
    assert!(err.contains("hunt.bad"), "{err}");
    assert!(err.contains("v9.99-no-such-tag"), "{err}");
}

#[test]
fn good_not_an_ancestor_of_bad_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Swapped endpoints: demo-bad descends from demo-good, not the other way round.
    let hunt = hunt_file(dir.path(), "demo-bad", "demo-good");
    let err = run_expecting_bad_input(&hunt);
    assert!(err.contains("ancestor"), "{err}");
}

/// `firstbad try` of demo-good with the host table's `boot_timeout_s` line replaced by
/// `extra`; returns the exit code, stdout and stderr, and the directory holding the state.
fn try_good_with_host(extra: &str) -> (Option<i32>, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "demo-good", "demo-bad");
    let text = std::fs::read_to_string(&hunt)
        .unwrap()
        .replace("boot_timeout_s = 240\n", extra);
    std::fs::write(&hunt, text).unwrap();
    let (code, stdout, stderr) = try_rev(&hunt, "demo-good");
    (code, stdout, stderr, dir)
}

/// The part of `firstbad try`'s output after `boot: `, as JSON.
/// Issue 18, item 7: on a terminal, each running build and boot has a live status line with
/// its elapsed time and phase, below the log lines; read back from tmux's screen.
#[test]
fn a_terminal_shows_a_live_status_line_for_the_running_boot() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "demo-good", "demo-bad");
    let session = format!("firstbad-e2e-{}", std::process::id());
    let command = format!(
        "FIRSTBAD_AGENT={} {} try {} demo-good; sleep 600",
        agent().display(),
        env!("CARGO_BIN_EXE_firstbad"),
        hunt.display()
    );
    let tmux = |args: &[&str]| Command::new("tmux").args(args).output().expect("tmux runs");
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "160",
        "-y",
        "40",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut screen = String::new();
    let mut seen = None;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        screen = String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", &session]).stdout)
            .into_owned();
        // `⠋ boot{commit=... boot=1 host=...} 4s booting`
        seen = screen
            .lines()
            .find(|l| {
                l.contains("boot{commit=")
                    && (l.contains("booting") || l.contains("running the workload"))
                    && l.split_whitespace().any(|w| {
                        w.ends_with('s') && w[..w.len() - 1].chars().all(|c| c.is_ascii_digit())
                    })
            })
            .map(str::to_owned);
        if seen.is_some() || screen.contains("\"kind\"") {
            break;
        }
    }
    tmux(&["kill-session", "-t", &session]);
    assert!(
        seen.is_some(),
        "no status line for the running boot on:\n{screen}"
    );
}

/// Issue 34, item 4: a signal stops `firstbad try` at once and cleanly, and says so. SIGTERM
/// while make builds: exit 143, make and its compilers gone, the kernel not cached. Ctrl-C
/// (SIGINT) while the VM boots: exit 130, the VM gone.
#[test]
fn a_signal_stops_a_build_or_a_boot_and_leaves_nothing_running() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "demo-good", "demo-bad");
    let b = demo_builder();
    let build_dir = std::fs::canonicalize(b.build_dir()).unwrap();
    // Processes at work in the build directory: make's and the compilers'.
    let building = || -> Vec<u32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == build_dir)
                    && alive(*pid)
            })
            .collect()
    };
    // A commit no other test builds (pruned from every hunt's range), so that make has work
    // and the kernel caches of the others stay: never cached.
    let rev = commit_by_subject("scsi: fcoe: fix a doubled word in a comment");
    if let Some(firstbad::journal::BuildOutcome::Built { image, .. }) = b.cached(&rev) {
        std::fs::remove_dir_all(image.parent().unwrap()).unwrap();
    }
    // The builder holds the build directory's lock, which firstbad's builder waits for.
    drop(b);
    let (code, err, _) = signal_try(&hunt, &rev, "TERM", |_| !building().is_empty());
    assert_eq!(code, Some(143), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    let gone = Instant::now() + Duration::from_secs(10);
    while !building().is_empty() {
        assert!(
            Instant::now() < gone,
            "make outlived firstbad: {:?}",
            building()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        demo_builder().cached(&rev).is_none(),
        "a stopped build was cached"
    );

    let (code, err, vms) = signal_try(&hunt, "demo-good", "INT", |pid| {
        !qemu_children(pid).is_empty()
    });
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert!(!vms.is_empty());
    let gone = Instant::now() + Duration::from_secs(10);
    while vms.iter().any(|&pid| alive(pid)) {
        assert!(Instant::now() < gone, "a VM outlived firstbad: {vms:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts `firstbad try hunt rev`, sends it `signal` once `ready(its pid)`, and waits (at
/// most 60 s) for it to end: its exit code, its stderr, and the VMs it had at the signal.
fn signal_try(
    hunt: &Path,
    rev: &str,
    signal: &str,
    ready: impl Fn(u32) -> bool,
) -> (Option<i32>, String, Vec<u32>) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = firstbad()
        .args(["try".as_ref(), hunt.as_os_str(), rev.as_ref()])
        .stdout(std::process::Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let said = || std::fs::read_to_string(log.path()).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(900);
    while !ready(child.id()) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "firstbad try ended ({status}) before the signal:\n{}",
                said()
            );
        }
        assert!(Instant::now() < deadline, "never ready:\n{}", said());
        std::thread::sleep(Duration::from_millis(100));
    }
    let vms = qemu_children(child.id());
    let sent = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let signalled = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(60),
            "firstbad try did not stop within 60 s of SIG{signal}:\n{}",
            said()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("SIG{signal}: stopped in {:?}", signalled.elapsed());
    (status.code(), said(), vms)
}

fn boot_json(stdout: &str) -> serde_json::Value {
    let at = stdout.find("boot: ").expect("try printed a boot") + "boot: ".len();
    serde_json::from_str(&stdout[at..]).expect("boot JSON")
}

/// A kernel that panics at boot is a failed boot with its console line, never a measurement.
#[test]
fn a_kernel_panic_at_boot_is_a_failed_boot_with_the_console_kept() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // No such init: the kernel panics with "No working init found".
    let (code, out, err, _dir) = try_good_with_host(
        "boot_timeout_s = 240\nextra_cmdline = \"rdinit=/firstbad-no-such-init init=/firstbad-no-such-init\"\n",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let boot = boot_json(&out);
    assert_eq!(boot["status"], "failed", "{boot}");
    let reason = boot["reason"].as_str().unwrap();
    assert!(reason.contains("Kernel panic"), "{reason}");
    let console = std::fs::read_to_string(boot["console"].as_str().unwrap()).unwrap();
    assert!(console.contains("Kernel panic - not syncing"), "{console}");
}

/// Issue 33: the qemu host's disk model reaches the guest. A 2009 SATA disk's queue of 32 is
/// the guest's (its block queue takes at most twice that with a scheduler, where qemu's
/// default ring gives 256), and a throughput cap holds O_DIRECT writes, past the guest's page
/// cache and the host's (cache = none), under it.
#[test]
fn a_disk_preset_reaches_the_guest_its_queue_and_its_throughput_cap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "demo-good", "demo-bad");
    // 24 MiB written with O_DIRECT by the agent's own writer: about 6 s under a 4 MB/s cap.
    let workload = dir.path().join("direct-write.toml");
    std::fs::write(
        &workload,
        "kind = \"sequential\"\nop = \"write\"\nblock_bytes = 1048576\nbytes = 25165824\n\
         direct = true\n",
    )
    .unwrap();
    let text = std::fs::read_to_string(&hunt)
        .unwrap()
        .replace(
            "boot_timeout_s = 240\n",
            "boot_timeout_s = 240\ndisk = \"sata-2009\"\ndisk_mb_s = 4\n",
        )
        .replace(
            &format!("{}/workloads/fsync-latency.toml", root().display()),
            &workload.display().to_string(),
        )
        .replace("fsync_latency_p50_ms", "mb_s");
    std::fs::write(&hunt, text).unwrap();
    let (code, stdout, stderr) = try_rev(&hunt, "demo-good");
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let boot = boot_json(&stdout);
    assert_eq!(boot["status"], "measured", "{boot}");
    let mb_s = boot["value"].as_f64().unwrap();
    eprintln!("O_DIRECT writes under a 4 MB/s cap: {mb_s:.2} MB/s");
    assert!(mb_s > 0.5 && mb_s < 4.4, "{mb_s} MB/s: {boot}");
    let devices = boot["result"]["system"]["devices"].as_array().unwrap();
    let vda = devices
        .iter()
        .find(|d| d["name"] == "vda")
        .unwrap_or_else(|| panic!("no vda in {devices:?}"));
    eprintln!("the guest's scratch disk: {vda}");
    let nr = vda["nr_requests"].as_u64().unwrap();
    assert!(nr <= 64, "the guest's queue: {vda}");
}

/// A host that does not bring the agent up in time is a failed boot, in bounded time.
#[test]
fn a_boot_timeout_is_a_failed_boot_in_bounded_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The bound is on the boot, not on a first clean kernel build (minutes on a fresh cache).
    let dir = tempfile::tempdir().unwrap();
    build_only(&hunt_file(dir.path(), "demo-good", "demo-bad"), "demo-good");
    let started = Instant::now();
    // TCG needs ~6 s to a healthy agent; 1 s cannot be met.
    let (code, out, err, _dir) = try_good_with_host("boot_timeout_s = 1\n");
    assert_eq!(code, Some(0), "{out}\n{err}");
    let boot = boot_json(&out);
    assert_eq!(boot["status"], "failed", "{boot}");
    assert!(
        boot["reason"].as_str().unwrap().contains("boot timeout"),
        "{boot}"
    );
    let booting = started.elapsed();
    assert!(booting < Duration::from_secs(120), "took {booting:?}");
}

/// The agent must report the candidate's kernel: booting one kernel while expecting another
/// is a failed boot ("wrong kernel"), so no sample of the wrong kernel ever counts.
#[test]
fn a_wrong_kernel_is_a_failed_boot() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let hunt_dir = tempfile::tempdir().unwrap();
    let build = build_only(
        &hunt_file(hunt_dir.path(), "demo-good", "demo-bad"),
        "demo-good",
    );
    let image = PathBuf::from(build["image"].as_str().expect("an image path"));
    let dir = tempfile::tempdir().unwrap();
    let cfg = firstbad::config::QemuConfig {
        memory_mb: 512,
        cpus: 1,
        accel: firstbad::config::Accel::Tcg,
        boot_timeout_s: 240,
        scratch_mb: 128,
        extra_cmdline: String::new(),
        disk: firstbad::config::disk::DiskModel::page_cache(),
    };
    let mut host = firstbad::hosts::qemu::QemuHost::new("t", &cfg, agent(), dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let console = dir.path().join("console.log");
    let r = rt.block_on(host.boot(&image, "6.1.192-fb000000000000", &console));
    let failure = match r {
        Err(Ok(f)) => f,
        Err(Err(e)) => panic!("host error: {e}"),
        Ok(_) => panic!("a wrong kernel was accepted"),
    };
    assert!(
        failure.reason.contains("wrong kernel"),
        "{}",
        failure.reason
    );
    assert!(
        failure
            .reason
            .contains(build["kernel_release"].as_str().unwrap()),
        "{}",
        failure.reason
    );
}

/// `firstbad reproduce` on the demo's two endpoint kernels (built by the bisection above and
/// cached): real builds, real qemu boots, a report to paste into a bug tracker.
#[test]
fn reproduce_confirms_the_demo_regression_between_its_two_kernels() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "demo-good", "demo-bad");
    let out = firstbad()
        .args(["reproduce", hunt.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let good = git(demo_tree(), &["rev-parse", "demo-good"]);
    let bad = git(demo_tree(), &["rev-parse", "demo-bad"]);
    for section in [
        "reproduced: regression confirmed",
        "fsync_latency_p50_ms",
        "[..]: 95% percentile-bootstrap intervals",
        "Confidence: high",
        // Each kernel as it booted: its commit and the release its boots reported.
        &format!("good: {} ", &good[..12]),
        &format!("-fb{}", &good[..12]),
        &format!("bad:  {} ", &bad[..12]),
        &format!("-fb{}", &bad[..12]),
        "The workload (",
        "kind = \"fsync-latency\"",
    ] {
        assert!(stdout.contains(section), "{section:?} in:\n{stdout}");
    }
    // Only the endpoints booted, at the baselines' first look or a later one.
    let events = journal_events(&dir.path().join("state/reproduce"));
    let booted: std::collections::BTreeSet<String> = events
        .iter()
        .filter(|(k, _, _)| k == "boot-finished")
        .filter_map(|(_, c, _)| c.clone())
        .collect();
    assert_eq!(booted.len(), 2, "{booted:?}");
    let html = std::fs::read_to_string(dir.path().join("state/reproduce/report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Kernels compared"));
    assert!(html.contains("Test-host settings that differ"));
    keep_if_asked(dir);
}

/// Issue 31 on real kernels: a regression made of two steps of different sizes
/// (scripts/make-twostep-branch: a 10 ms sleep in ext4's fsync path, three commits later a
/// 25 ms one), found in one `firstbad run`: both culprits named, each confirmed against its
/// parent (the first by a re-test beside good and bad, the second by its kernels' identity:
/// its parent builds the first culprit's kernel and it builds bad's), the second step's
/// baselines carried from the run's boots of its ends, the first one's share of the whole given in the
/// metric's own unit (about a third of the milliseconds, though two thirds of the way on the
/// log scale the statistics read). Run with the product's defaults
/// (`configs/twostep.toml`, reverts included) in docs/measurements.md.
#[test]
fn names_both_steps_of_a_two_step_regression_in_one_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    make_branch("make-twostep-branch", &[]);
    let first = commit_in(
        "demo-good..twostep",
        "ext4: wait for writeback in flight before the fsync commit",
    );
    let second = commit_in(
        "demo-good..twostep",
        "ext4: let a write-back cache settle before fsync returns",
    );
    let dir = tempfile::tempdir().unwrap();
    // Each step's revert on top of bad is booted in 3 rounds (9 boots, 18 of the 70 a run
    // takes: 12 min warm against the 10 this issue may add): the revert is the spine test's
    // subject and tests/engine.rs's, both culprits in one run this one's.
    let hunt = branch_hunt(dir.path(), "twostep", &kernel_tables(), "revert = false\n");
    let out = firstbad().arg("run").arg(&hunt).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // 0: every step confirmed.
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("first bad commit: {}", &first[..12])),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "first bad commit of step-2 from {} to ",
            &first[..12]
        )) && stdout.contains(&format!(": {} ext4: let", &second[..12])),
        "{stdout}"
    );
    let events = journal_events(&dir.path().join("state"));
    let confirmed: Vec<&str> = events
        .iter()
        .filter(|(k, _, b)| k == "confirmation" && b["confirmed"] == true)
        .filter_map(|(_, c, _)| c.as_deref())
        .collect();
    assert_eq!(confirmed, [first.as_str(), second.as_str()], "{stdout}");
    // The second step's ends (the first culprit, bad) were booted by the first: their boots
    // carried in, once each, instead of 10 baseline boots more.
    let carried: Vec<&str> = events
        .iter()
        .filter(|(k, _, _)| k == "boots-carried")
        .filter_map(|(_, c, _)| c.as_deref())
        .collect();
    assert_eq!(carried.len(), 2, "{carried:?}");
    assert!(carried.contains(&first.as_str()), "{carried:?}");
    // The first step's share, in the metric's own unit: about 17 ms of 53 (its culprit's
    // median over good's and bad's, docs/measurements.md), 32%, where the log scale puts it
    // two thirds of the way.
    let share: f64 = stdout
        .split("the first found is ")
        .nth(1)
        .and_then(|s| s.split('%').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no share of the first step: {stdout}"));
    assert!((15.0..=50.0).contains(&share), "{share}% in:\n{stdout}");
    assert!(stdout.contains("in the metric's own unit"), "{stdout}");
    eprintln!(
        "two-step hunt: {} boots, {} builds",
        count(&events, "boot-finished"),
        count(&events, "build-finished")
    );
    keep_if_asked(dir);
}

/// Issue 33: one of the reports' own kinds of regression, found on a disk that behaves like
/// theirs. The default dirty limits cut as before kernel bug 12309 (`scripts/make-seed-branch dirty`:
/// vm_dirty_ratio 20 -> 5, dirty_background_ratio 10 -> 2, between two comment fixes), fsync
/// timed beside two buffered writers on the `sata-2009` disk: fsync's median doubles (Δ/σ
/// about 3.7, docs/seed-regressions.md). The culprit is named and confirmed, and the report's
/// snapshot diff names the setting it changed. Its two neighbours build good's and bad's
/// kernels, so after the baselines nothing more is booted (about 4.5 minutes warm).
#[test]
fn bisects_the_dirty_limits_cut_on_a_slow_disk_and_names_the_setting() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    make_branch("make-seed-branch", &["dirty"]);
    let culprit = commit_in("demo-good..dirty", "mm: lower the default dirty limits");
    let dir = tempfile::tempdir().unwrap();
    let tables = kernel_tables_with_host("scratch_mb = 1536\ndisk = \"sata-2009\"\n")
        .replace(
            "workloads/fsync-latency.toml",
            "workloads/fsync-under-dirty-limits.toml",
        )
        .replace("timeout_s = 300", "timeout_s = 600");
    assert!(tables.contains("sata-2009") && tables.contains("dirty-limits"));
    let hunt = branch_hunt(dir.path(), "dirty", &tables, "min_effect = 0.2\n");
    let out = firstbad().arg("run").arg(&hunt).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!(
            "first bad commit: {} mm: lower the default dirty limits",
            &culprit[..12]
        )),
        "{stdout}"
    );
    let events = journal_events(&dir.path().join("state"));
    let confirmation = events
        .iter()
        .find(|(k, _, _)| k == "confirmation")
        .expect("a confirmation");
    assert_eq!(confirmation.1.as_deref(), Some(culprit.as_str()));
    assert_eq!(confirmation.2["confirmed"], true, "{:?}", confirmation.2);
    // Issue 56 item 3: every boot of the local VM has this machine's pressure beside it, and
    // the report says how busy the machine was.
    assert_eq!(
        count(&events, "boot-pressure"),
        count(&events, "boot-finished"),
        "a boot without its pressure"
    );
    let markdown = firstbad().arg("report").arg(&hunt).output().unwrap();
    let markdown = String::from_utf8_lossy(&markdown.stdout);
    assert!(
        markdown.contains("## The machine's load during the boots"),
        "{markdown}"
    );
    let json = firstbad()
        .args(["report", "--format", "json"])
        .arg(&hunt)
        .output()
        .unwrap();
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let diff = report["snapshot_diff"].as_array().expect("a snapshot diff");
    let ratio = diff
        .iter()
        .find(|d| d["setting"] == "sysctls.vm.dirty_ratio")
        .unwrap_or_else(|| panic!("vm.dirty_ratio not named: {diff:?}"));
    assert_eq!(
        (&ratio["good"], &ratio["bad"]),
        (&serde_json::json!(["20"]), &serde_json::json!(["5"])),
        "{ratio}"
    );
    eprintln!(
        "dirty-limits hunt: {} boots, {} builds; {}",
        count(&events, "boot-finished"),
        count(&events, "build-finished"),
        stdout.lines().next().unwrap_or_default()
    );
    keep_if_asked(dir);
}

/// A hunt file in `dir` from demo-good to the demo tree's branch `branch` (its name too), its
/// state in `dir/state`, with these tables and `[classify]` lines.
fn branch_hunt(dir: &Path, branch: &str, tables: &str, classify: &str) -> PathBuf {
    let hunt = dir.join("hunt.toml");
    std::fs::write(
        &hunt,
        format!(
            "[hunt]\nname = \"{branch}\"\nrepo = \"{}\"\ngood = \"demo-good\"\nbad = \"{branch}\"\n\
             state_dir = \"{}\"\n\n{tables}\n[classify]\n{classify}",
            demo_tree().display(),
            dir.join("state").display(),
        ),
    )
    .unwrap();
    hunt
}

/// Runs `scripts/<script> <args>` (a branch added to the demo tree), which must succeed.
fn make_branch(script: &str, args: &[&str]) {
    let made = Command::new(root().join("scripts").join(script))
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(made.status.success(), "{script} {args:?} failed");
}

/// Events of `kind` in a journal's `events`.
fn count(events: &[(String, Option<String>, serde_json::Value)], kind: &str) -> usize {
    events.iter().filter(|(k, _, _)| k == kind).count()
}

/// The kernel built from the demo's good endpoint as the e2e hunts build it (the same build
/// directory and cache), built again from scratch of its artifact: the image, and the
/// build directory's `vmlinux` as the build left it.
/// The builder of the e2e hunts' kernels (the demo hunt file's `[build]`), sharing their cache.
fn demo_builder() -> firstbad::build::Builder {
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "demo-good", "demo-bad");
    let cfg = firstbad::config::HuntConfig::load(&hunt).unwrap();
    let firstbad::config::Build::Source(build) = &cfg.build else {
        panic!("the e2e hunts build from source");
    };
    firstbad::build::Builder::new(demo_tree(), build).unwrap()
}

fn build_fresh(b: &firstbad::build::Builder, commit: &str) -> (Vec<u8>, Vec<u8>) {
    if let Some(firstbad::journal::BuildOutcome::Built { image, .. }) = b.cached(commit) {
        std::fs::remove_dir_all(image.parent().expect("an artifact directory")).unwrap();
    }
    match b.build(commit).expect("the builder runs") {
        firstbad::journal::BuildOutcome::Built { image, .. } => (
            std::fs::read(image).unwrap(),
            std::fs::read(b.build_dir().join("vmlinux")).unwrap(),
        ),
        failed => panic!("{commit} does not build: {failed:?}"),
    }
}

/// `bytes` with its ELF build ids (the 20-byte hashes of GNU build-id notes: the kernel's own,
/// and the vDSO's inside it) zeroed: the kernel's is a hash of the whole image, the release
/// string included, so it differs with the release.
fn without_build_id(bytes: &[u8]) -> Vec<u8> {
    // The note's header: name size 4, descriptor size 20, type 3 (NT_GNU_BUILD_ID), "GNU\0".
    const NOTE: [u8; 16] = [4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, b'G', b'N', b'U', 0];
    let mut out = bytes.to_vec();
    let notes: Vec<usize> = out
        .windows(NOTE.len())
        .enumerate()
        .filter_map(|(i, w)| (w == NOTE).then_some(i + NOTE.len()))
        .collect();
    assert!(!notes.is_empty(), "vmlinux has a GNU build-id note");
    for at in notes {
        out[at..(at + 20).min(bytes.len())].fill(0);
    }
    out
}

/// `bytes` with every occurrence of `from` replaced by `to` (of the same length).
fn replaced(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
    out
}

/// Issue 35, item 3: pruning never leaves out a commit that changes the kernel. Commits that
/// the demo hunt's pruning leaves out (a comment in a file the config does not build, and a
/// merge of documentation, judged against its first parent), built anyway, give the vmlinux of
/// their first parent apart from the release string that carries the commit's id (and the
/// build id, a hash of it all).
#[test]
fn commits_pruning_leaves_out_build_the_kernel_of_their_parent() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = demo_builder();
    let good = git(demo_tree(), &["rev-parse", "demo-good^{commit}"]);
    let bad = git(demo_tree(), &["rev-parse", "demo-bad^{commit}"]);
    for c in [&good, &bad] {
        assert!(matches!(
            b.build(c).expect("the builder runs"),
            firstbad::journal::BuildOutcome::Built { .. }
        ));
    }
    let inputs = b.inputs(&good).unwrap().union(b.inputs(&bad).unwrap());
    let history = firstbad::history::History::open(demo_tree()).unwrap();
    let links = history
        .unchanged_links(&bad, std::slice::from_ref(&good), false, &inputs)
        .unwrap();
    let pruned = |c: &str| links.iter().any(|u| u.commit == c && u.nth == 0);
    let culprit = commit_by_subject(&demo_fact("culprit_subject"));
    assert!(!pruned(&culprit), "the culprit changes fs/ext4");
    // Their kernels, unpacked from the cached bzImages (scripts/extract-vmlinux of the demo
    // tree), the release string that carries each commit's id blanked out (and the build id,
    // a hash of it all): built once on a machine, then read from the build cache.
    let vmlinux = |c: &str| -> Vec<u8> {
        let image = match b.build(c).expect("the builder runs") {
            firstbad::journal::BuildOutcome::Built { image, .. } => image,
            failed => panic!("{c} does not build: {failed:?}"),
        };
        let out = Command::new("sh")
            .arg(demo_tree().join("scripts/extract-vmlinux"))
            .arg(&image)
            .output()
            .unwrap();
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "extract-vmlinux {c}"
        );
        let release = firstbad::build::local_version(c);
        without_build_id(&replaced(
            &out.stdout,
            release.as_bytes(),
            &vec![b'x'; release.len()],
        ))
    };
    let not_built = commit_by_subject("mm: memcontrol: fix spelling of 'occurred'");
    let merge = commit_by_subject("Merge branch 'docs-next'");
    for c in [&not_built, &merge] {
        assert!(pruned(c), "{c} is left out");
        let parent = git(demo_tree(), &["rev-parse", &format!("{c}^1")]);
        assert!(
            vmlinux(c) == vmlinux(&parent),
            "{c}, left out, built another kernel than its parent {parent}"
        );
    }

    // The whole of a small history (the five commits around the culprit that the pool and
    // LAVA hunts bisect): the commits pruning leaves out are exactly those whose kernel is
    // their parent's, apart from the release string; most were built by the hunts.
    let line = first_parent_line();
    let (ifix, ic) = (
        position(&line, &commit_by_subject(&demo_fact("fix_subject"))),
        position(&line, &culprit),
    );
    let (small_good, small_bad) = (&line[ifix + 1], &line[ic + 2]);
    let small = firstbad::history::History::open(demo_tree())
        .unwrap()
        .unchanged_links(small_bad, std::slice::from_ref(small_good), false, &inputs)
        .unwrap();
    let mut kernels = vec![vmlinux(small_good)];
    let (mut same, mut left_out) = (Vec::new(), Vec::new());
    let mut previous = small_good.clone();
    for c in &line[ifix + 2..=ic + 2] {
        kernels.push(vmlinux(c));
        let n = kernels.len();
        if kernels[n - 1] == kernels[n - 2] {
            same.push(c.clone());
        }
        // The builder's identity (vmlinux and modules) says the same as the unpacked images
        // (item 2: identical kernels share their boots, and only they do).
        assert_eq!(
            kernel_id(&b, c) == kernel_id(&b, &previous),
            kernels[n - 1] == kernels[n - 2],
            "{c}: the kernel identity disagrees with the images"
        );
        previous = c.clone();
        if small.iter().any(|u| &u.commit == c) {
            left_out.push(c.clone());
        }
    }
    assert_eq!(
        left_out, same,
        "the commits left out are not those whose kernel is their parent's"
    );
    assert!(!same.contains(&culprit) && !same.is_empty(), "{same:?}");
}

/// Issue 32, finding 0: the same source gives the same kernel, whenever it is built. One
/// commit built twice in the hunts' build directory gives the same bzImage byte for byte, and
/// a commit whose only built change is a comment (kernel/signal.c) gives the same vmlinux
/// apart from the release string that carries its id (and the build id, a hash of it all). Before the build number was pinned,
/// each build in a directory counted up ("#2", "#3", … in the version banner) and from "#10"
/// on the layout of every image shifted.
#[test]
fn the_same_source_builds_the_same_kernel_whenever_it_is_built() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let b = demo_builder();
    let good = git(demo_tree(), &["rev-parse", "demo-good^{commit}"]);
    let comment = commit_by_subject("signal: fix spelling of 'overridden' in a comment");
    let (image1, vmlinux1) = build_fresh(&b, &good);
    let (_, vmlinux2) = build_fresh(&b, &comment);
    let (image3, vmlinux3) = build_fresh(&b, &good);
    assert!(image1 == image3, "demo-good built twice gave two bzImages");
    assert!(
        vmlinux1 == vmlinux3,
        "demo-good built twice gave two vmlinux"
    );
    let (g, c) = (
        firstbad::build::local_version(&good),
        firstbad::build::local_version(&comment),
    );
    assert!(
        vmlinux1.windows(g.len()).any(|w| w == g.as_bytes()),
        "the release string {g} is in the image"
    );
    let differ = without_build_id(&vmlinux1)
        .iter()
        .zip(&without_build_id(&replaced(
            &vmlinux2,
            c.as_bytes(),
            g.as_bytes(),
        )))
        .filter(|(a, b)| a != b)
        .count();
    if differ > 0 || vmlinux1.len() != vmlinux2.len() {
        // Kept for a person to compare (`cmp -l`).
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reproducible");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("vmlinux-good"), &vmlinux1).unwrap();
        std::fs::write(out.join("vmlinux-comment"), &vmlinux2).unwrap();
        eprintln!("kept both vmlinux in {}", out.display());
    }
    assert!(
        vmlinux1.len() == vmlinux2.len() && differ == 0,
        "a comment changed the kernel: {differ} bytes differ beyond the release string \
         ({} against {} bytes)",
        vmlinux1.len(),
        vmlinux2.len()
    );
    // Issue 35, item 2: the builder gives the two one identity, and a hunt boots one of them
    // for both; the culprit, which changes fs/ext4, has its own.
    assert_eq!(kernel_id(&b, &good), kernel_id(&b, &comment));
    let culprit = commit_by_subject(&demo_fact("culprit_subject"));
    assert_ne!(kernel_id(&b, &good), kernel_id(&b, &culprit));
}

/// The identity the builder gave `commit`'s kernel (built now if it is not cached).
fn kernel_id(b: &firstbad::build::Builder, commit: &str) -> String {
    match b.build(commit).expect("the builder runs") {
        firstbad::journal::BuildOutcome::Built {
            kernel_id: Some(id),
            ..
        } => id,
        other => panic!("{commit}: no kernel identity: {other:?}"),
    }
}
