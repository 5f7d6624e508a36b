//! The real `firstbad-agent` binary on 127.0.0.1, as the orchestrator sees it: shared by the
//! API tests and the workload tests.

// Each test binary includes this module and uses a different subset of it.
#![allow(dead_code)]

use firstbad_wire::{RunStarted, RunState, RunStatus, WorkloadResult};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
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
        let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
        let mut child = Command::new(env!("CARGO_BIN_EXE_firstbad-agent"))
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
        // A vmstat sample each whole second of the run.
        assert_eq!(r.vmstat.len(), r.duration_s.floor() as usize, "{r:?}");
        assert!(self.scratch_entries().is_empty(), "run files left behind");
        r
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
