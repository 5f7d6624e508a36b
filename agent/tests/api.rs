//! Black-box tests of the real `firstbad-agent` binary over HTTP, as the orchestrator sees it.

mod common;
use common::{Agent, Loop, Mounted, TOKEN};
use firstbad_wire::{ApiError, Identity, RunStarted, RunState, RunStatus};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

fn small_run() -> Value {
    json!({
        "kind": "fsync-latency", "writers": 1, "writer_bytes": 8 << 20,
        "writer_block_bytes": 65536, "append_bytes": 4096, "fsyncs": 20, "interval_ms": 1,
        "warmup_ms": 50
    })
}

/// A run that would take hours unless cancelled.
fn long_run() -> Value {
    json!({
        "kind": "fsync-latency", "writers": 1, "writer_bytes": 32 << 20,
        "writer_block_bytes": 65536, "append_bytes": 4096, "fsyncs": 1_000_000,
        "interval_ms": 10, "warmup_ms": 0
    })
}

async fn api_error(resp: reqwest::Response) -> String {
    resp.json::<ApiError>().await.expect("ApiError body").error
}

#[tokio::test]
async fn requests_without_the_right_token_get_401() {
    let agent = Agent::start(&[]);
    let none = agent
        .http
        .get(agent.url("/v1/identity"))
        .send()
        .await
        .expect("GET");
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    assert!(api_error(none).await.contains("Authorization"));

    let wrong = agent
        .http
        .get(agent.url("/v1/identity"))
        .bearer_auth("test-token-0123456788")
        .send()
        .await
        .expect("GET");
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(api_error(wrong).await, "wrong bearer token");

    // Runs cannot be started without the token either.
    let run = agent
        .http
        .post(agent.url("/v1/runs"))
        .json(&json!({ "workload": small_run() }))
        .send()
        .await
        .expect("POST");
    assert_eq!(run.status(), StatusCode::UNAUTHORIZED);
    assert!(agent.scratch_entries().is_empty());
}

#[tokio::test]
async fn identity_is_this_machines_kernel() {
    let agent = Agent::start(&[]);
    let resp = agent
        .http
        .get(agent.url("/v1/identity"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("GET identity");
    assert_eq!(resp.status(), StatusCode::OK);
    let id: Identity = resp.json().await.expect("Identity body");
    let uname = Command::new("uname").arg("-r").output().expect("uname -r");
    assert_eq!(
        id.kernel_release,
        String::from_utf8_lossy(&uname.stdout).trim()
    );
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot_id");
    assert_eq!(id.boot_id, boot_id.trim());
    assert_eq!(id.protocol, firstbad_wire::PROTOCOL_VERSION);
    assert_eq!(id.agent_version, env!("CARGO_PKG_VERSION"));
    assert!(!id.hostname.is_empty());
}

#[tokio::test]
async fn a_small_fsync_latency_run_reports_every_fsync() {
    let agent = Agent::start(&[]);
    let resp = agent.post_run(small_run()).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let started: RunStarted = resp.json().await.expect("RunStarted body");
    let status = agent
        .wait_until_not_running(&started.id, Duration::from_secs(120))
        .await;
    assert_eq!(status.state, RunState::Done, "{:?}", status.error);
    let result = status.result.expect("a done run has a result");
    assert_eq!(result.kind, "fsync-latency");
    let series = &result.series["fsync_latency"];
    assert_eq!(series.unit, "ms");
    assert_eq!(series.samples.len(), 20);
    assert!(
        series.samples.iter().all(|&ms| ms > 0.0),
        "{:?}",
        series.samples
    );
    let m = &result.metrics;
    assert!(m["fsync_latency_p50_ms"] > 0.0);
    assert!(m["fsync_latency_p50_ms"] <= m["fsync_latency_p99_ms"]);
    assert!(m["fsync_latency_p99_ms"] <= m["fsync_latency_max_ms"]);
    let max = series.samples.iter().cloned().fold(0.0, f64::max);
    assert_eq!(m["fsync_latency_max_ms"], max);
    assert_eq!(m["fsyncs"], 20.0);
    assert!(m["writer_mb_s"] > 0.0, "{m:?}");
    assert!(result.duration_s > 0.0);
    assert!(
        agent.scratch_entries().is_empty(),
        "{:?}",
        agent.scratch_entries()
    );
}

#[tokio::test]
async fn one_run_at_a_time_and_cancel_cleans_up() {
    let agent = Agent::start(&[]);
    let resp = agent.post_run(long_run()).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let started: RunStarted = resp.json().await.expect("RunStarted body");
    assert_eq!(agent.status(&started.id).await.state, RunState::Running);

    let second = agent.post_run(small_run()).await;
    assert_eq!(second.status(), StatusCode::CONFLICT);
    let why = api_error(second).await;
    assert!(
        why.contains(&started.id) && why.contains("one workload at a time"),
        "{why}"
    );

    // Cancel once the workload has created its files.
    agent.wait_for_run_files(Duration::from_secs(10)).await;
    let cancel = agent
        .http
        .post(agent.url(&format!("/v1/runs/{}/cancel", started.id)))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("POST cancel");
    assert_eq!(cancel.status(), StatusCode::OK);
    let status: RunStatus = cancel.json().await.expect("RunStatus body");
    assert_eq!(status.state, RunState::Cancelled);
    assert!(status.result.is_none());
    assert!(
        agent.scratch_entries().is_empty(),
        "{:?}",
        agent.scratch_entries()
    );

    // The agent is free again.
    let third = agent.post_run(small_run()).await;
    assert_eq!(third.status(), StatusCode::ACCEPTED);
}

#[tokio::test]
async fn unknown_runs_are_404() {
    let agent = Agent::start(&[]);
    for (method, path) in [
        (reqwest::Method::GET, "/v1/runs/nope"),
        (reqwest::Method::POST, "/v1/runs/nope/cancel"),
    ] {
        let resp = agent
            .http
            .request(method, agent.url(path))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        assert!(api_error(resp).await.contains("nope"));
    }
}

#[tokio::test]
async fn bad_requests_get_a_4xx_that_says_why() {
    let agent = Agent::start(&[]);
    let post_raw = |body: String| {
        agent
            .http
            .post(agent.url("/v1/runs"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };

    let malformed = post_raw(r#"{"workload": {"kind": "fsync-latency", "#.to_owned())
        .await
        .expect("POST");
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    assert!(api_error(malformed).await.contains("request body"));

    let unknown = agent.post_run(json!({ "kind": "disk-melter" })).await;
    assert_eq!(unknown.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(api_error(unknown).await.contains("disk-melter"));

    let mut misspelt = small_run();
    misspelt["fsync_count"] = json!(3);
    let misspelt = agent.post_run(misspelt).await;
    assert_eq!(misspelt.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(api_error(misspelt).await.contains("fsync_count"));

    let mut zero = small_run();
    zero["fsyncs"] = json!(0);
    let zero = agent.post_run(zero).await;
    assert_eq!(zero.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(api_error(zero).await.contains("fsyncs = 0"));

    let mut too_big_block = small_run();
    too_big_block["writer_block_bytes"] = json!((64 << 20) + 1);
    let too_big_block = agent.post_run(too_big_block).await;
    assert_eq!(too_big_block.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(api_error(too_big_block)
        .await
        .contains("writer_block_bytes"));

    let mut no_room = small_run();
    no_room["writer_bytes"] = json!(1u64 << 60);
    let no_room = agent.post_run(no_room).await;
    assert_eq!(no_room.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(api_error(no_room).await.contains("MiB free"));

    let oversized = post_raw(format!(r#"{{"pad": "{}"}}"#, "x".repeat(100 * 1024)))
        .await
        .expect("POST");
    assert_eq!(oversized.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(api_error(oversized).await.contains("larger than"));

    // Nothing was started by any of these.
    assert!(agent.scratch_entries().is_empty());
}

/// Background writers with O_DIRECT (`writer_direct`): the run completes with every fsync
/// timed and the writers' rate; a block size O_DIRECT cannot take is refused up front.
#[tokio::test]
async fn fsync_latency_with_direct_writers() {
    let agent = Agent::start(&[]);
    let mut direct = small_run();
    direct["writer_direct"] = json!(true);
    let r = agent.run(direct.clone()).await;
    assert_eq!(r.series["fsync_latency"].samples.len(), 20);
    assert!(r.metrics["writer_mb_s"] > 0.0, "{:?}", r.metrics);

    direct["writer_block_bytes"] = json!(1000);
    let refused = agent.post_run(direct).await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let why = api_error(refused).await;
    assert!(
        why.contains("multiple of 512") && why.contains("writer_direct"),
        "{why}"
    );
}

/// `duration_ms` stops a sequential run near that time even though `bytes` is far from done.
#[tokio::test]
async fn sequential_stops_near_its_duration() {
    // 1 GiB of holes read 512 bytes at a time with O_DIRECT: minutes of work.
    let lo = Loop::sparse(1024);
    let agent = Agent::start(&["--scratch-device", &lo.dev]);
    let r = agent
        .run(json!({
            "kind": "sequential", "op": "read", "device": lo.dev, "block_bytes": 512,
            "bytes": 1u64 << 30, "direct": true, "duration_ms": 1000, "drop_caches": false
        }))
        .await;
    let m = &r.metrics;
    // The loop checks the clock before each request; one request takes well under 0.1 s.
    assert!(m["secs"] >= 1.0 && m["secs"] < 1.3, "{m:?}");
    assert!(m["bytes"] < (1u64 << 30) as f64, "{m:?}");
    assert!(r.duration_s < 5.0, "{}", r.duration_s);
}

/// The agent refuses to start on a scratch device it must not destroy, and says why.
#[test]
fn a_refused_scratch_device_says_why() {
    let refuse = |device: &str, expected: &str| {
        let scratch = tempfile::tempdir().expect("tempdir");
        let out = Command::new(env!("CARGO_BIN_EXE_firstbad-agent"))
            .args(["--listen", "127.0.0.1:0", "--token", TOKEN, "--scratch"])
            .arg(scratch.path())
            .args(["--scratch-device", device])
            .output()
            .expect("run firstbad-agent");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{device}: started anyway: {stderr}");
        assert!(
            stderr.contains(&format!("--scratch-device {device}")) && stderr.contains(expected),
            "{device}: {stderr}"
        );
        assert!(!stderr.contains("listening"), "{stderr}");
    };
    refuse("/dev/firstbad-no-such-device", "cannot stat");
    let file = tempfile::NamedTempFile::new().expect("file");
    refuse(&file.path().display().to_string(), "not a block device");
    let fs = Mounted::ext4(64);
    refuse(
        &fs.lo.dev,
        &format!("is mounted on {}", fs.dir.path().display()),
    );

    // The same device twice is a mistake too.
    let lo = Loop::sparse(16);
    let scratch = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_firstbad-agent"))
        .args(["--listen", "127.0.0.1:0", "--token", TOKEN, "--scratch"])
        .arg(scratch.path())
        .args(["--scratch-device", &lo.dev, "--scratch-device", &lo.dev])
        .output()
        .expect("run firstbad-agent");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("given twice"));
}

/// The 4xx paths not covered above: unknown endpoint, wrong method, wrong content type, devices
/// that are not scratch devices, out-of-range threads, a refused fio option.
#[tokio::test]
async fn other_bad_requests_get_a_4xx_that_says_why() {
    let agent = Agent::start(&[]);
    let nowhere = agent
        .http
        .get(agent.url("/v2/runs"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("GET");
    assert_eq!(nowhere.status(), StatusCode::NOT_FOUND);
    assert!(api_error(nowhere).await.contains("/v1/identity"));

    let wrong_method = agent
        .http
        .delete(agent.url("/v1/runs"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("DELETE");
    assert_eq!(wrong_method.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(api_error(wrong_method).await.contains("DELETE"));

    let not_json = agent
        .http
        .post(agent.url("/v1/runs"))
        .bearer_auth(TOKEN)
        .body(json!({ "workload": small_run() }).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(not_json.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(api_error(not_json).await.contains("Content-Type"));

    for (workload, expected) in [
        (
            json!({ "kind": "sequential", "op": "read", "device": "/dev/sda",
                    "block_bytes": 4096, "bytes": 1 << 20 }),
            "not a scratch device",
        ),
        (
            json!({ "kind": "sequential", "op": "read", "devices": ["/dev/sda", "/dev/sdb"],
                    "block_bytes": 4096, "bytes": 1 << 20 }),
            "not a scratch device",
        ),
        (
            json!({ "kind": "sequential", "op": "read", "block_bytes": 6000,
                    "bytes": 1 << 20, "direct": true }),
            "multiple of 512",
        ),
        (
            json!({ "kind": "threads", "threads": 0, "op": "read", "file_bytes": 1 << 20,
                    "block_bytes": 4096 }),
            "threads = 0",
        ),
        (
            json!({ "kind": "threads", "threads": 257, "op": "read", "file_bytes": 1 << 20,
                    "block_bytes": 4096 }),
            "threads = 257",
        ),
        (
            json!({ "kind": "fio", "job": "[r]\nrw=read\n", "device": "/dev/sda" }),
            "not a scratch device",
        ),
        (
            json!({ "kind": "fio", "job": "[w]\nexec_prerun=rm -rf /\n" }),
            "job line 2",
        ),
        (
            json!({ "kind": "command", "script": "true", "metrics": { "from": "json-lines" } }),
            "--allow-command",
        ),
    ] {
        let resp = agent.post_run(workload.clone()).await;
        assert_eq!(
            resp.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{workload}"
        );
        let why = api_error(resp).await;
        assert!(why.contains(expected), "{workload}: {why}");
    }
    assert!(agent.scratch_entries().is_empty());
}

/// A scratch device that was mounted after the agent started, or that is smaller than the run,
/// is refused when the run is requested (422), before anything is read or written.
#[tokio::test]
async fn a_scratch_device_mounted_later_or_too_small_is_refused_per_run() {
    let lo = Loop::sparse(16);
    let agent = Agent::start(&["--scratch-device", &lo.dev]);
    let read = |bytes: u64| {
        json!({ "kind": "sequential", "op": "read", "device": lo.dev, "block_bytes": 4096,
                "bytes": bytes, "drop_caches": false })
    };
    let too_big = agent.post_run(read(32 << 20)).await;
    assert_eq!(too_big.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let why = api_error(too_big).await;
    assert!(why.contains("has 16777216 bytes"), "{why}");

    common::sh(&format!("mkfs.ext4 -q -F {}", lo.dev));
    let mnt = tempfile::tempdir().expect("mount point");
    common::sh(&format!("mount {} {}", lo.dev, mnt.path().display()));
    let mounted = agent.post_run(read(1 << 20)).await;
    let status = mounted.status();
    let why = api_error(mounted).await;
    common::sh(&format!("umount {}", mnt.path().display()));
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{why}");
    assert!(why.contains("is mounted on"), "{why}");
    // Unmounted again, the device serves runs again.
    let r = agent
        .run(json!({ "kind": "fio", "job": "[r]\nrw=read\nbs=1m\n", "device": lo.dev }))
        .await;
    assert_eq!(r.metrics["read_bytes"], (16u64 << 20) as f64);
}
