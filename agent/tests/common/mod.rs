//! The real `firstbad-agent` binary on 127.0.0.1, as the orchestrator sees it: shared by the
//! API tests and the workload tests.

// Each test binary includes this module and uses a different subset of it.
#![allow(dead_code)]

use firstbad_wire::{RunStarted, RunState, RunStatus, WorkloadResult};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bearer token every test agent is started with.
pub const TOKEN: &str = "test-token-0123456789";

/// A running agent with its own scratch directory; killed on drop.
pub struct Agent {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The scratch directory the agent may write in.
    pub scratch: tempfile::TempDir,
    /// A plain client (no token set: each request adds its own).
    pub http: reqwest::Client,
}

impl Agent {
    /// Starts the agent on a free port with `extra` arguments and waits for its listening line.
    pub fn start(extra: &[&str]) -> Agent {
        // In the target dir, not /tmp: O_DIRECT needs a real file system, and /tmp may be tmpfs.
        Agent::start_in(Path::new(env!("CARGO_TARGET_TMPDIR")), extra)
    }

    /// Like [`Agent::start`], with the scratch directory made inside `parent`.
    pub fn start_in(parent: &Path, extra: &[&str]) -> Agent {
        Agent::spawn(parent, &[], extra)
    }

    /// Like [`Agent::start`], run through `wrapper` (e.g. `prlimit --nofile=64:64`).
    pub fn start_wrapped(wrapper: &[&str], extra: &[&str]) -> Agent {
        Agent::spawn(Path::new(env!("CARGO_TARGET_TMPDIR")), wrapper, extra)
    }

    fn spawn(parent: &Path, wrapper: &[&str], extra: &[&str]) -> Agent {
        let scratch = tempfile::tempdir_in(parent).expect("tempdir");
        let agent = env!("CARGO_BIN_EXE_firstbad-agent");
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(agent);
                c
            }
            None => Command::new(agent),
        };
        let mut child = command
            .args(["--listen", "127.0.0.1:0", "--token", TOKEN, "--scratch"])
            .arg(scratch.path())
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start firstbad-agent");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Keep draining stderr after the first line so that the agent never blocks on it.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("firstbad-agent: listening on ") {
                    let _ = tx.send(addr.to_owned());
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("agent printed its listening line");
        Agent {
            child,
            base: format!("http://{addr}"),
            scratch,
            http: reqwest::Client::new(),
        }
    }

    /// The agent's peak resident memory so far (`VmHWM`), in bytes.
    pub fn peak_rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("agent's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("VmHWM line")
            * 1024
    }

    /// How the agent exited, if it did.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("wait on the agent")
    }

    /// The agent's URL for `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `POST /v1/runs` with the token.
    pub async fn post_run(&self, workload: Value) -> reqwest::Response {
        self.http
            .post(self.url("/v1/runs"))
            .bearer_auth(TOKEN)
            .json(&json!({ "workload": workload }))
            .send()
            .await
            .expect("POST /v1/runs")
    }

    /// `GET /v1/runs/{id}`, which must answer 200.
    pub async fn status(&self, id: &str) -> RunStatus {
        let resp = self
            .http
            .get(self.url(&format!("/v1/runs/{id}")))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("GET run");
        assert_eq!(resp.status(), StatusCode::OK);
        resp.json().await.expect("RunStatus body")
    }

    /// Polls a run until it is no longer running; fails the test past `timeout`.
    pub async fn wait_until_not_running(&self, id: &str, timeout: Duration) -> RunStatus {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status(id).await;
            if status.state != RunState::Running {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "run {id} still running after {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Runs `workload` to the end and returns its result, with snapshot and vmstat checked.
    pub async fn run(&self, workload: Value) -> WorkloadResult {
        let resp = self.post_run(workload).await;
        assert_eq!(resp.status(), StatusCode::ACCEPTED);
        let started: RunStarted = resp.json().await.expect("RunStarted");
        let status = self
            .wait_until_not_running(&started.id, Duration::from_secs(120))
            .await;
        assert_eq!(status.state, RunState::Done, "{:?}", status.error);
        let r = status.result.expect("result");
        let sys = r.system.as_ref().expect("every run has a system snapshot");
        assert!(sys.sysctls.contains_key("vm.dirty_ratio"), "{sys:?}");
        assert!(sys.mount.is_some() && sys.cpus > 0, "{sys:?}");
        // A vmstat sample each whole second of the run: the sampler stops a few ms before
        // the run's clock does, so a run of 2.004 s may have 1 sample or 2, never 3.
        let whole = r.duration_s.floor() as usize;
        let n = r.vmstat.len();
        assert!(
            n <= whole && n + 1 >= whole,
            "{n} vmstat samples in {} s",
            r.duration_s
        );
        for (k, s) in r.vmstat.iter().enumerate() {
            assert!(
                s.t_s >= (k + 1) as f64 && s.t_s <= r.duration_s,
                "sample {k} at {} s of {} s",
                s.t_s,
                r.duration_s
            );
        }
        assert!(self.scratch_entries().is_empty(), "run files left behind");
        r
    }

    /// Waits until a run has made a file in its run directory under scratch (so that a cancel
    /// has something to clean up); fails the test past `timeout`.
    pub async fn wait_for_run_files(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let made = std::fs::read_dir(self.scratch.path())
                .expect("read scratch")
                .flatten()
                .any(|run| {
                    std::fs::read_dir(run.path()).is_ok_and(|mut files| files.next().is_some())
                });
            if made {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no run made a file in {timeout:?}: {:?}",
                self.scratch_entries()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The names in the scratch directory.
    pub fn scratch_entries(&self) -> Vec<String> {
        std::fs::read_dir(self.scratch.path())
            .expect("read scratch")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `script` with `sh -c`, which must succeed; its stdout then stderr.
pub fn sh(script: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", script])
        .output()
        .expect("sh");
    assert!(out.status.success(), "{script}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// A loop device over a file in tmpfs; detached on drop.
pub struct Loop {
    /// `/dev/loopN`.
    pub dev: String,
    _file: tempfile::NamedTempFile,
}

impl Loop {
    /// A loop device over `mib` MiB of random data.
    pub fn random(mib: u64) -> Loop {
        Loop::over(&format!("head -c {} /dev/urandom >", mib << 20))
    }

    /// A loop device over a sparse file of `mib` MiB (reads of holes cost no memory).
    pub fn sparse(mib: u64) -> Loop {
        Loop::over(&format!("truncate -s {} ", mib << 20))
    }

    fn over(fill: &str) -> Loop {
        // Backed by tmpfs: its pages never leave memory, so dd and the agent both read through
        // the same loop and block layers and neither races the host's page-cache eviction or
        // disk (a disk-backed file gave 33 vs 166 MB/s when another build evicted it between
        // the two sides' runs).
        let file = tempfile::NamedTempFile::new_in("/dev/shm").expect("tmpfs at /dev/shm");
        sh(&format!("{fill} {}", file.path().display()));
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(file.path())
            .output()
            .expect("losetup (run as root)");
        assert!(out.status.success(), "losetup: {out:?}");
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Loop { dev, _file: file }
    }

    /// Sectors (512 bytes) read from the device since it was set up (`/sys/block/loopN/stat`,
    /// third field).
    pub fn sectors_read(&self) -> u64 {
        let name = self.dev.trim_start_matches("/dev/");
        let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).expect("stat");
        stat.split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .expect("read sectors field")
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// An ext4 file system on a loop device, mounted on a temporary directory; unmounted on drop.
pub struct Mounted {
    /// The mount point.
    pub dir: tempfile::TempDir,
    /// The device under it (declared after `dir`: detached after the unmount).
    pub lo: Loop,
}

impl Mounted {
    /// A fresh `mib` MiB ext4 file system.
    pub fn ext4(mib: u64) -> Mounted {
        let lo = Loop::sparse(mib);
        // Inode tables and journal written now: ext4lazyinit writing them in the background
        // would compete with the workload being measured.
        sh(&format!(
            "mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 {}",
            lo.dev
        ));
        let dir = tempfile::tempdir().expect("mount point");
        sh(&format!("mount {} {}", lo.dev, dir.path().display()));
        Mounted { dir, lo }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
