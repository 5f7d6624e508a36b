//! Regression tests for issue 19 ("Hardening"), one per finding, against the real agent binary
//! (and, for fio jobs, the real fio).

mod common;
use common::Agent;
use firstbad_wire::ApiError;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// fio reads a job file with `fgets(buf, 8192, f)`: 8191 bytes at most per read.
const FIO_READ: usize = 8191;

async fn api_error(resp: reqwest::Response) -> String {
    resp.json::<ApiError>().await.expect("ApiError body").error
}

/// A path outside the agent's scratch directory that the test owns and removes.
struct Outside(PathBuf);

impl Outside {
    fn new(name: &str) -> Outside {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("firstbad-issue19-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Outside(path)
    }

    fn exists(&self) -> bool {
        self.0.exists()
    }

    fn as_str(&self) -> &str {
        self.0.to_str().expect("UTF-8 path")
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A `#` comment exactly as long as one read of fio's, so that `hidden` starts a line of its
/// own for fio while it looks like part of the comment to a line-by-line check.
fn hidden_after_comment(hidden: &str) -> String {
    format!("#{}{hidden}\n", "x".repeat(FIO_READ - 1))
}

/// Posts `job`; returns the status and, for a refused job, the error, or for a started one the
/// run's final state.
async fn post_fio(agent: &Agent, job: &str) -> (StatusCode, String) {
    let resp = agent
        .post_run(json!({ "kind": "fio", "job": job, "timeout_s": 30 }))
        .await;
    let status = resp.status();
    if status == StatusCode::ACCEPTED {
        let started: Value = resp.json().await.expect("RunStarted");
        let id = started["id"].as_str().expect("id").to_owned();
        let end = agent
            .wait_until_not_running(&id, std::time::Duration::from_secs(60))
            .await;
        (status, format!("{:?}: {:?}", end.state, end.error))
    } else {
        (status, api_error(resp).await)
    }
}

// issue 19: a `filename=` hidden after byte 8191 of a comment is a new line to fio, which then
// wrote outside scratch.
#[tokio::test]
async fn fio_filename_hidden_past_fios_line_buffer_is_refused() {
    let agent = Agent::start(&[]);
    let outside = Outside::new("filename");
    let job = format!(
        "[w]\nrw=write\nbs=4k\nsize=64k\n{}",
        hidden_after_comment(&format!("filename={}", outside.as_str()))
    );
    let (status, why) = post_fio(&agent, &job).await;
    assert!(!outside.exists(), "fio wrote {}", outside.as_str());
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{why}");
    assert!(why.contains("job line 5") && why.contains("8192"), "{why}");

    // A long comment that fits fio's buffer is a comment to fio too: the run goes ahead, and
    // what fio runs is the parsed job, without the comment, so nothing lands outside.
    let fits = format!(
        "[w]\nrw=write\nbs=4k\nsize=64k\n#{}filename={}\n",
        "x".repeat(8000),
        outside.as_str()
    );
    let (status, end) = post_fio(&agent, &fits).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(end.starts_with("Done"), "{end}");
    assert!(!outside.exists(), "fio wrote {}", outside.as_str());
    assert!(agent.scratch_entries().is_empty());
}

// issue 19: `ioengine=exec` and `program=` hidden the same way ran a program on an agent
// started without --allow-command.
#[tokio::test]
async fn fio_exec_engine_hidden_past_fios_line_buffer_is_refused() {
    let agent = Agent::start(&[]);
    let ran = Outside::new("exec");
    let job = format!(
        "[w]\nsize=64k\nruntime=1\ntime_based=1\n{}{}{}",
        hidden_after_comment("ioengine=exec"),
        hidden_after_comment("program=/usr/bin/touch"),
        hidden_after_comment(&format!("arguments={}", ran.as_str())),
    );
    let (status, why) = post_fio(&agent, &job).await;
    assert!(!ran.exists(), "fio ran touch {}", ran.as_str());
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{why}");
    assert!(why.contains("job line 5"), "{why}");

    // Not hidden, the engine and its options are refused by name.
    for (job, named) in [
        ("[w]\nsize=64k\nioengine=exec\n", "ioengine"),
        ("[w]\nsize=64k\nprogram=/usr/bin/true\n", "program"),
        (
            "[w]\nsize=64k\n; a comment\n  ioengine = exec\n",
            "ioengine",
        ),
    ] {
        let (status, why) = post_fio(&agent, job).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{job}: {why}");
        assert!(why.contains(named), "{job}: {why}");
    }
    assert!(!ran.exists());
}

// issue 19: an ioengine fio does not know is a shared object it tries to dlopen.
#[tokio::test]
async fn fio_engines_that_load_a_shared_object_are_refused() {
    let agent = Agent::start(&[]);
    for engine in [
        "./x.so",
        "libcrypt.so.1",
        "external:/tmp/x.so",
        "/tmp/x.so",
        "net",
    ] {
        let job = format!("[w]\nrw=write\nsize=64k\nioengine={engine}\n");
        let (status, why) = post_fio(&agent, &job).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{engine}: {why}");
        assert!(why.contains("ioengine") && why.contains("psync"), "{why}");
    }
    // The engines in the allowlist run.
    for engine in ["psync", "sync", "libaio", "posixaio", "pvsync2"] {
        let job = format!("[w]\nrw=write\nbs=4k\nsize=64k\nioengine={engine}\n");
        let (status, end) = post_fio(&agent, &job).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{engine}");
        assert!(end.starts_with("Done"), "{engine}: {end}");
    }
}

// issue 19: `include` pulls in a file the agent never checked.
#[tokio::test]
async fn fio_include_directives_are_refused() {
    let agent = Agent::start(&[]);
    for job in [
        "include /etc/fio.job\n[w]\nsize=64k\n",
        "[w]\nsize=64k\ninclude /etc/fio.job\n",
        "[w]\nsize=64k\n  include=x\n",
    ] {
        let (status, why) = post_fio(&agent, job).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{job}: {why}");
        assert!(why.contains("include"), "{job}: {why}");
    }
}
