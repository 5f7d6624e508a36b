//! `kind = "lava"` hosts against a real LAVA (Debian's lava-server and lava-dispatcher
//! 2023.01), installed and started on loopback by scripts/install-lava: a scheduler, a worker
//! and two qemu devices under TCG, the demo tree's kernels (shared with the other kernel tests
//! through the build cache), firstbad's agent in its one-shot mode in each job's initramfs.
//!
//! Nothing here is a stand-in: the jobs are LAVA's, the cancels and the device taken offline go
//! through LAVA's own REST API, the server restart kills and restarts LAVA's gunicorn.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// The local LAVA: its URL and token file (scripts/install-lava is idempotent: 0.05 s when all
/// runs).
fn lava() -> &'static (String, PathBuf) {
    static LAVA: OnceLock<(String, PathBuf)> = OnceLock::new();
    LAVA.get_or_init(|| {
        let out = Command::new(root().join("scripts/install-lava"))
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/install-lava runs");
        assert!(out.status.success(), "install-lava failed");
        let text = String::from_utf8(out.stdout).unwrap();
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k))
                .unwrap_or_else(|| panic!("install-lava printed no {k}: {text}"))
                .to_owned()
        };
        (get("LAVA_URL="), PathBuf::from(get("LAVA_TOKEN_FILE=")))
    })
}

fn token() -> String {
    std::fs::read_to_string(&lava().1)
        .unwrap()
        .trim()
        .to_owned()
}

/// One REST call with curl (the tests talk to LAVA with a different client than firstbad).
fn api(method: &str, path: &str, body: Option<&str>) -> serde_json::Value {
    let mut c = Command::new("curl");
    c.args(["-sS", "-m", "30", "-X", method])
        .arg("-H")
        .arg(format!("Authorization: Token {}", token()))
        .arg(format!("{}/api/v0.2/{path}", lava().0));
    if let Some(b) = body {
        c.args(["-H", "Content-Type: application/json", "-d", b]);
    }
    let out = c.output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// The farm's jobs whose definition holds `needle`, newest first.
fn jobs_with(needle: &str) -> Vec<serde_json::Value> {
    let out = Command::new("curl")
        .args(["-sS", "-m", "30", "-G"])
        .arg("-H")
        .arg(format!("Authorization: Token {}", token()))
        .arg(format!("{}/api/v0.2/jobs/", lava().0))
        .arg("--data-urlencode")
        .arg(format!("original_definition__contains={needle}"))
        .args([
            "--data-urlencode",
            "ordering=-id",
            "--data-urlencode",
            "limit=200",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["results"].as_array().cloned().unwrap_or_default()
}

/// Puts every device back to Good (a test that failed half-way may have left one out).
fn devices_good() {
    for d in ["qemu-01", "qemu-02"] {
        api(
            "POST",
            &format!("devices/{d}/set_health/"),
            Some(r#"{"health":"GOOD","reason":"firstbad tests"}"#),
        );
    }
}

/// A hunt from `good` to `bad` in the demo tree on the local LAVA's two devices.
fn hunt_file(dir: &Path, name: &str, good: &str, bad: &str) -> PathBuf {
    let root = root();
    let (url, token_file) = lava();
    let hunt = dir.join("hunt.toml");
    std::fs::write(
        &hunt,
        format!(
            r#"[hunt]
name = "{name}"
repo = "{repo}"
good = "{good}"
bad = "{bad}"
state_dir = "{state}"

[build]
config = "{root}/configs/kernel/qemu-x86_64.config"
jobs = 2

[[hosts]]
name = "farm"
kind = "lava"
server = "{url}"
token_file = "{token_file}"
device_type = "qemu"
jobs = 2
job_timeout_s = 600
server_deadline_s = 300
scratch_mb = 320

[workload]
file = "{root}/workloads/fsync-latency.toml"
metric = "fsync_latency_p50_ms"
timeout_s = 300

[classify]
# One step: the farm is this test's subject (every step in one run is metric_hunts.rs's).
max_culprits = 1
# The revert on top is e2e.rs's subject.
revert = false
"#,
            repo = demo_tree().display(),
            state = dir.join("state").display(),
            root = root.display(),
            token_file = token_file.display(),
        ),
    )
    .unwrap();
    hunt
}

fn try_events(dir: &Path) -> Vec<(String, Option<String>, serde_json::Value)> {
    let db = dir.join("state/try/try.sqlite");
    if !db.exists() {
        return Vec::new();
    }
    journal_file_events(&db)
}

fn boot_json(stdout: &str) -> serde_json::Value {
    let at = stdout.find("boot: ").expect("try printed a boot") + "boot: ".len();
    serde_json::from_str(&stdout[at..]).expect("boot JSON")
}

/// `firstbad try` through LAVA: one job, submitted through the REST API with firstbad's token
/// in its definition, journalled before and after the submission, its result read from the
/// job's log (every sample kept). Then a job that the farm cancels (a person in LAVA's web UI,
/// here its REST API) while it runs: a failed boot that says so, never a measurement. Then a
/// server that never answers: a host error naming it once `server_deadline_s` has passed.
#[test]
fn try_through_lava_and_a_job_the_farm_cancels() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    devices_good();
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "lava-try", "demo-good", "demo-bad");
    // The deadlines below are on the farm, not on a kernel build.
    build_only(&hunt, "demo-good");
    let started = Instant::now();
    let (code, stdout, stderr) = try_rev(&hunt, "demo-good");
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let boot = boot_json(&stdout);
    assert_eq!(boot["status"], "measured", "{boot}\n{stderr}");
    let events = try_events(dir.path());
    let farm: Vec<_> = events
        .iter()
        .filter(|(k, _, _)| k == "host-checkpoint")
        .collect();
    assert_eq!(farm.len(), 2, "intent, then the id: {farm:?}");
    assert!(farm[0].2["data"].get("job").is_none(), "{:?}", farm[0]);
    let token = farm[0].2["data"]["token"].as_str().unwrap().to_owned();
    let id = farm[1].2["data"]["job"].as_str().unwrap().to_owned();
    assert_eq!(farm[1].2["data"]["token"], token.as_str());
    let job = api("GET", &format!("jobs/{id}/"), None);
    assert_eq!(job["health"], "Complete", "{job}");
    assert_eq!(
        jobs_with(&token).len(),
        1,
        "the token finds the job, and only it"
    );
    let finished = events
        .iter()
        .find(|(k, _, _)| k == "boot-finished")
        .unwrap();
    let samples = &finished.2["outcome"]["result"]["series"]["fsync_latency"]["samples"];
    assert_eq!(samples.as_array().unwrap().len(), 40, "every sample kept");
    // LAVA's own results page has the metrics as test cases too.
    let cases = api("GET", &format!("jobs/{id}/tests/"), None);
    assert!(
        cases.to_string().contains("fsync_latency_p50_ms"),
        "{cases}"
    );
    eprintln!("try through LAVA: {:.1} s", started.elapsed().as_secs_f64());

    // The farm cancels the next job while it runs.
    let dir2 = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir2.path(), "lava-cancel", "demo-good", "demo-bad");
    let child = firstbad()
        .arg("try")
        .arg(&hunt)
        .arg("demo-good")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    let id = loop {
        assert!(Instant::now() < deadline, "no job was submitted");
        if let Some(id) = try_events(dir2.path()).iter().find_map(|(k, _, b)| {
            (k == "host-checkpoint")
                .then(|| b["data"]["job"].as_str().map(str::to_owned))
                .flatten()
        }) {
            break id;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let said = api("GET", &format!("jobs/{id}/cancel/"), None);
    assert!(said.to_string().contains("cancel"), "{said}");
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let boot = boot_json(&stdout);
    assert_eq!(boot["status"], "failed", "{boot}");
    let reason = boot["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("LAVA job {id} was canceled on the farm")),
        "{reason}"
    );
    let job = api("GET", &format!("jobs/{id}/"), None);
    assert_eq!(job["health"], "Canceled", "{job}");

    // A server that does not answer past server_deadline_s (a closed port on loopback) is a
    // host error that names it, never a boot.
    let dir3 = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir3.path(), "lava-gone", "demo-good", "demo-bad");
    let text = std::fs::read_to_string(&hunt)
        .unwrap()
        .replace(&lava().0, "http://127.0.0.1:9")
        .replace("server_deadline_s = 300", "server_deadline_s = 3");
    std::fs::write(&hunt, text).unwrap();
    let started = Instant::now();
    let (code, _, stderr) = try_rev(&hunt, "demo-good");
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("the LAVA server http://127.0.0.1:9 has not answered for"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}

/// Stops LAVA's gunicorn (the REST API and web pages), waits `down_for` once it no longer
/// answers, and starts it again with scripts/install-lava.
fn restart_lava_server(down_for: Duration) {
    let pid_file = Path::new("/var/tmp/firstbad-lava/run/lava-server-gunicorn.pid");
    let pid = std::fs::read_to_string(pid_file).unwrap();
    let pid = pid.trim();
    // The script started it with setsid: the pid is its process group.
    let killed = Command::new("kill")
        .args(["-TERM", "--", &format!("-{pid}")])
        .status()
        .unwrap();
    assert!(killed.success(), "gunicorn {pid} was running");
    let gone = Instant::now() + Duration::from_secs(30);
    while Command::new("curl")
        .args(["-fsS", "-m", "2", "-o", "/dev/null"])
        .arg(format!("{}/api/v0.2/system/version/", lava().0))
        .status()
        .unwrap()
        .success()
    {
        assert!(Instant::now() < gone, "gunicorn still answers");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(down_for);
    let out = Command::new(root().join("scripts/install-lava"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "install-lava restarted gunicorn");
}

/// What `pgrep -f` finds job `id`'s qemu by: LAVA runs it on the images it deployed into the
/// dispatcher's tmp directory of that job (docs/lava.md, "The resulting qemu command").
fn qemu_of(id: &str) -> String {
    format!("qemu-system.*/var/lib/lava/dispatcher/tmp/{id}/")
}

/// Whether a process whose command line matches `pattern` runs on this machine.
fn running(pattern: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", pattern])
        .stdout(Stdio::null())
        .status()
        .expect("pgrep runs (apt install procps)")
        .success()
}

/// Sets `device`'s health through LAVA's REST API, as a person in its web UI does.
fn set_health(device: &str, health: &str, reason: &str) {
    let said = api(
        "POST",
        &format!("devices/{device}/set_health/"),
        Some(&serde_json::json!({ "health": health, "reason": reason }).to_string()),
    );
    assert_eq!(said["message"], "OK", "{device} to {health}: {said}");
}

/// Job `id` once LAVA has finished it.
fn finished_job(id: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let job = api("GET", &format!("jobs/{id}/"), None);
        if job["state"] == "Finished" {
            return job;
        }
        assert!(Instant::now() < deadline, "job {id} did not end: {job}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The reason a lost board's device is put in Maintenance with.
const BOARD_LOST: &str = "firstbad test: board lost";

/// Takes the device of a running job of this hunt offline the way a lab does when a board
/// dies: LAVA's health set to Maintenance (no more jobs for it), and its qemu killed (the
/// board gone). Returns the device and the job.
///
/// A short job lasts ~11 s from its submission, so the one seen Running may end before its
/// qemu can be killed (CI once found job 12's qemu already gone): such a job is left to end
/// as it would have, its device is given back, and the next Running job is taken instead.
fn take_a_device_offline(hunt: &mut std::process::Child) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(600);
    // Jobs that ended before their qemu could be killed.
    let mut missed: Vec<String> = Vec::new();
    loop {
        assert!(
            Instant::now() < deadline,
            "no job of the hunt could be killed while its qemu ran, in 600 s (jobs that \
             ended first: {missed:?})"
        );
        if let Some(status) = hunt.try_wait().unwrap() {
            panic!(
                "the hunt ended ({status}) before a device could be taken offline (jobs that \
                 ended first: {missed:?})"
            );
        }
        let running_job = jobs_with("firstbad farm ").into_iter().find(|j| {
            j["state"] == "Running"
                && j["actual_device"].is_string()
                && j["description"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("firstbad farm "))
                && !missed.contains(&j["id"].to_string())
        });
        let Some(job) = running_job else {
            std::thread::sleep(Duration::from_millis(300));
            continue;
        };
        let id = job["id"].as_i64().unwrap().to_string();
        let device = job["actual_device"].as_str().unwrap().to_owned();
        if lose_the_board(&id, &device, deadline) {
            return (device, id);
        }
        missed.push(id);
    }
}

/// Puts `device` in Maintenance and kills the qemu of job `id` on it once that qemu runs; the
/// job must then end Incomplete, and the device stays in Maintenance. False when the job ended
/// first, the device left as it was or put back to Good: the job stopped running before its
/// qemu was seen, its qemu exited before the kill, or the kill came after its result was in
/// (the job ends Complete, as it would have anyway).
fn lose_the_board(id: &str, device: &str, deadline: Instant) -> bool {
    let qemu = qemu_of(id);
    // LAVA deploys the images first, then starts qemu: wait for the board to be up, for as
    // long as the job runs.
    let mut asked = Instant::now();
    while !running(&qemu) {
        assert!(
            Instant::now() < deadline,
            "job {id}'s qemu on {device} never ran"
        );
        if asked.elapsed() >= Duration::from_secs(1) {
            if api("GET", &format!("jobs/{id}/"), None)["state"] != "Running" {
                return false;
            }
            asked = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    set_health(device, "MAINTENANCE", BOARD_LOST);
    let pkill = Command::new("pkill")
        .args(["-KILL", "-f", &qemu])
        .status()
        .unwrap();
    // pkill says 1 when nothing matched: the qemu exited since pgrep saw it.
    assert!(
        matches!(pkill.code(), Some(0 | 1)),
        "pkill -KILL -f {qemu}: {pkill}"
    );
    let killed = pkill.success().then(|| finished_job(id));
    match killed {
        Some(job) if job["health"] != "Complete" => {
            assert_eq!(
                job["health"], "Incomplete",
                "job {id} after its qemu on {device} was killed: {job}"
            );
            // LAVA ends the job Incomplete and marks the device's health Unknown, which gives
            // it jobs again: the lab keeps it in Maintenance once the job has ended.
            set_health(device, "MAINTENANCE", BOARD_LOST);
            true
        }
        _ => {
            set_health(
                device,
                "GOOD",
                "firstbad test: the job ended before its board was lost",
            );
            false
        }
    }
}

/// The demo hunt through LAVA to the demo's culprit, with two jobs in flight on two devices,
/// across a `kill -9` of firstbad while jobs run (the rerun re-attaches to them by the ids in
/// the journal instead of submitting them again), a LAVA server restart in the middle of the
/// hunt (costs only time) and a device that dies in the middle of a job (a failed boot; the
/// hunt goes on with the other device).
#[test]
fn the_demo_hunt_through_lava_across_a_kill_9_a_server_restart_and_a_lost_device() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    devices_good();
    let culprit = commit_by_subject(&demo_fact("culprit_subject"));
    // The farm is the subject, not the range: five commits around the culprit (after the
    // build break's fix, two past it; kernels the other tests have built). Every candidate's
    // verdict comes from its kernel's identity and the culprit needs no re-test (it builds
    // bad's kernel over a parent that builds good's), so the jobs are the baselines' and a
    // drift check's, some 12: the kill, the restart and the lost device come early in them.
    let line = first_parent_line();
    let (ifix, ic) = (
        position(&line, &commit_by_subject(&demo_fact("fix_subject"))),
        position(&line, &culprit),
    );
    let dir = tempfile::tempdir().unwrap();
    let hunt = hunt_file(dir.path(), "lava-demo", &line[ifix + 1], &line[ic + 2]);
    let state = dir.path().join("state");
    let started = Instant::now();

    // kill -9 with a submitted job in flight, once the baselines are under way: at once, as
    // the job runs on the farm, not in firstbad, and lasts some 11 s from its submission.
    kill_9_when(&["run".as_ref(), hunt.as_os_str()], Duration::ZERO, || {
        state.join("journal.sqlite").exists() && {
            let e = journal_events(&state);
            e.iter().filter(|(k, _, _)| k == "boot-finished").count() >= 2
                && e.last()
                    .is_some_and(|(k, _, b)| k == "host-checkpoint" && b["data"]["job"].is_string())
        }
    });
    let before = journal_events(&state);
    let finished = |e: &[(String, Option<String>, serde_json::Value)]| -> std::collections::HashSet<(String, u64)> {
        e.iter()
            .filter(|(k, _, _)| k == "boot-finished")
            .map(|(_, c, b)| (c.clone().unwrap(), b["boot"].as_u64().unwrap()))
            .collect()
    };
    let done_before = finished(&before);
    let in_flight: Vec<(String, u64, String)> = before
        .iter()
        .filter(|(k, _, b)| k == "host-checkpoint" && b["data"]["job"].is_string())
        .map(|(_, c, b)| {
            (
                c.clone().unwrap(),
                b["boot"].as_u64().unwrap(),
                b["data"]["job"].as_str().unwrap().to_owned(),
            )
        })
        .filter(|(c, n, _)| !done_before.contains(&(c.clone(), *n)))
        .collect();
    assert!(!in_flight.is_empty(), "a job was in flight at the kill");

    // The rerun, with the server restarted and a device lost on the way.
    let log = dir.path().join("rerun.log");
    let mut child = firstbad()
        .arg("run")
        .arg(&hunt)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let boots_now = || {
        journal_events(&state)
            .iter()
            .filter(|(k, _, _)| k == "boot-finished")
            .count()
    };
    let wait_boots = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(1800);
        while boots_now() < n {
            assert!(Instant::now() < deadline, "the hunt stalled");
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    wait_boots(done_before.len() + in_flight.len() + 1);
    restart_lava_server(Duration::from_secs(15));
    let (lost_device, lost_job) = take_a_device_offline(&mut child);
    // Jobs submitted from here on can only go to the other device.
    let offline_from = jobs_with("firstbad farm ")
        .first()
        .and_then(|j| j["id"].as_i64())
        .unwrap();
    let out = child.wait_with_output_with_timeout();
    devices_good();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("first bad commit: {}", &culprit[..12])),
        "{stdout}\n{stderr}"
    );

    let events = journal_events(&state);
    // Re-attached, not submitted again: each boot in flight at the kill kept its one job, and
    // its result (printed while firstbad was dead) was read from LAVA's log.
    for (c, n, id) in &in_flight {
        let tokens: std::collections::HashSet<&str> = events
            .iter()
            .filter(|(k, ec, b)| {
                k == "host-checkpoint" && ec.as_deref() == Some(c) && b["boot"].as_u64() == Some(*n)
            })
            .map(|(_, _, b)| b["data"]["token"].as_str().unwrap())
            .collect();
        assert_eq!(tokens.len(), 1, "boot {n} of {c} was submitted again");
        assert!(
            stderr.contains(&format!("re-attached to LAVA job {id}")),
            "{stderr}"
        );
        let outcome = events
            .iter()
            .find(|(k, ec, b)| {
                k == "boot-finished" && ec.as_deref() == Some(c) && b["boot"].as_u64() == Some(*n)
            })
            .unwrap_or_else(|| panic!("boot {n} of {c} finished"));
        assert_eq!(
            outcome.2["outcome"]["status"], "measured",
            "{:?}",
            outcome.2
        );
    }
    // The server restart cost only time.
    assert!(
        stderr.contains("does not answer"),
        "firstbad saw the server away: {stderr}"
    );
    // The lost device's job is a failed boot that names it, never a verdict.
    let lost = events
        .iter()
        .find(|(k, _, b)| {
            k == "boot-finished"
                && b["outcome"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains(&format!("LAVA job {lost_job} ")))
        })
        .unwrap_or_else(|| panic!("job {lost_job} on {lost_device} is a failed boot"));
    assert_eq!(lost.2["outcome"]["status"], "failed", "{:?}", lost.2);
    let later: Vec<_> = jobs_with("firstbad farm ")
        .into_iter()
        .filter(|j| j["id"].as_i64().unwrap() > offline_from)
        .collect();
    assert!(
        !later.is_empty(),
        "the hunt went on after the device was lost"
    );
    assert!(
        later
            .iter()
            .all(|j| j["actual_device"] != lost_device.as_str()),
        "no job went to the lost device {lost_device}: {later:?}"
    );
    // Nothing of the hunt is left running on the farm.
    let left: Vec<_> = jobs_with("firstbad farm ")
        .into_iter()
        .filter(|j| j["state"] != "Finished")
        .map(|j| j["id"].clone())
        .collect();
    assert!(left.is_empty(), "jobs left on the farm: {left:?}");
    eprintln!(
        "demo hunt through LAVA: {} boots, {:.0} s with the kill, the restart and the lost device",
        events
            .iter()
            .filter(|(k, _, _)| k == "boot-finished")
            .count(),
        started.elapsed().as_secs_f64()
    );
    keep_if_asked(dir);
}

/// `wait_with_output` with a bound: a hung hunt fails the test instead of hanging CI.
trait WaitBounded {
    fn wait_with_output_with_timeout(self) -> std::process::Output;
}

impl WaitBounded for std::process::Child {
    fn wait_with_output_with_timeout(mut self) -> std::process::Output {
        let deadline = Instant::now() + Duration::from_secs(2400);
        loop {
            if self.try_wait().unwrap().is_some() {
                return self.wait_with_output().unwrap();
            }
            if Instant::now() > deadline {
                let _ = self.kill();
                panic!("the hunt did not end within 40 min");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}
