//! Every workload kind run for real through the agent's HTTP API on this machine, with its
//! figures checked against an independent tool (dd or fio) on the same file or loop device.
//!
//! The machine is shared and its disk is virtual, so throughput moves by 2x between two dd runs
//! in a row. Each side therefore runs several times, interleaved with the other, and what is
//! compared is the median of the rounds' ratios, each round's two runs back to back (medians
//! of 3 of each side on its own still differed by 2.8x either way on this box under load 8,
//! and the best of five of each once by 2.7x: the agent's one quiet moment against none of
//! dd's, beside a kernel build). The tolerance is "within a factor of 2", which still catches
//! unit mistakes (KiB vs MB, ms vs s), counting errors and a block size not applied.
//! These tests need root (loop devices, drop_caches), as CI has.

mod common;
use common::{sh, Agent, Loop, Mounted, TOKEN};
use firstbad_wire::{RunStarted, RunState, RunStatus};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// dd and the agent may differ by this factor either way (see the module comment).
const TOLERANCE: f64 = 2.0;
/// Runs of each side, interleaved, in rounds whose ratios are compared (see the module comment).
const ROUNDS: usize = 5;
/// Rounds of each side run before those measured, in the tests whose page cache takes new
/// pages: this VM's memory is slow the first time the guest touches a page (the host faults it
/// in), so the first 64 MiB of page cache after a while of other work ran at 110 MB/s and the
/// sixth at 2 GB/s (dd into ext4 on a tmpfs loop device, fresh files, an idle machine).
const WARM_ROUNDS: usize = 3;
/// The I/O tests run one at a time: two of them at once on 2 cores measure each other.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// dd's rate in MB/s from the bytes and seconds it prints ("67108864 bytes (67 MB, 64 MiB)
/// copied, 0.0312 s, 2.1 GB/s"): its own rate has two digits, 1.1 GB/s for 1.05 to 1.15.
fn dd_mb_s(args: &str) -> f64 {
    let out = sh(&format!("dd {args} 2>&1"));
    let last = out.lines().last().expect("dd output");
    let bytes: f64 = last
        .split(' ')
        .next()
        .and_then(|b| b.parse().ok())
        .expect("dd byte count");
    let secs: f64 = last
        .split(", ")
        .find_map(|part| part.strip_suffix(" s")?.parse().ok())
        .expect("dd seconds");
    bytes / 1e6 / secs.max(1e-9)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The agent's rates against the peer's, round by round (`ours[i]` and `theirs[i]` ran back
/// to back): their median ratio is within [`TOLERANCE`] either way.
fn assert_close(what: &str, ours: Vec<f64>, theirs: Vec<f64>) {
    assert_eq!(ours.len(), theirs.len(), "{what}: one run of each a round");
    let ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(o, t)| o / t).collect();
    let ratio = median(ratios.clone());
    let rounds = || {
        ours.iter()
            .zip(&theirs)
            .map(|(o, t)| format!("{o:.0}/{t:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    assert!(
        ratio > 1.0 / TOLERANCE && ratio < TOLERANCE,
        "{what}: agent/reference median ratio {ratio:.2} over rounds (MB/s) {} (tolerance x{TOLERANCE})",
        rounds()
    );
    eprintln!(
        "{what}: agent/reference median ratio {ratio:.2}; rounds (MB/s) {}",
        rounds()
    );
}

/// The md RAID0 report's shape: O_DIRECT reads of a device with a 6144-byte block (1.5 pages).
#[tokio::test]
async fn sequential_direct_reads_of_a_loop_device_match_dd() {
    let _serial = SERIAL.lock().await;
    let lo = Loop::random(128);
    let agent = Agent::start(&["--scratch-device", &lo.dev]);
    let dd = format!("if={} of=/dev/null bs=6144 iflag=direct", lo.dev);
    let _warm = dd_mb_s(&dd);
    let workload = json!({
        "kind": "sequential", "op": "read", "device": lo.dev, "block_bytes": 6144,
        "bytes": 128u64 << 20, "direct": true,
        // dd does not drop caches, and the loop device's backing file sits in the page cache:
        // dropping it for one side only measured the disk against memory (37 vs 196 MB/s).
        "drop_caches": false
    });
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..ROUNDS {
        theirs.push(dd_mb_s(&dd));
        let r = agent.run(workload.clone()).await;
        // 128 MiB in whole 6144-byte blocks: 21845 requests, each timed (64 MiB ran for
        // a third of a second: a few scheduler slices beside a kernel build).
        assert_eq!(r.metrics["requests"], 21845.0);
        assert_eq!(r.series["request_latency"].samples.len(), 21845);
        assert!(r.metrics["request_latency_p50_ms"] <= r.metrics["request_latency_max_ms"]);
        ours.push(r.metrics["mb_s"]);
    }
    assert_close("6144-byte O_DIRECT reads", ours, theirs);
}

/// fio's JSON from `args` (run as `fio --output-format=json ARGS`), skipping warnings.
fn fio_json(args: &str) -> Value {
    let out = sh(&format!("fio --output-format=json {args}"));
    let start = out.find("\n{").map_or(0, |i| i + 1);
    serde_json::from_str(&out[start..]).expect("fio JSON parses")
}

/// fio's jobs together, as the agent counts several devices: all bytes read over the longest
/// job's runtime, in MB/s; and the sum of usr_cpu + sys_cpu (% of a CPU).
fn fio_read_mb_s_and_cpu(v: &Value) -> (f64, f64) {
    let jobs = v["jobs"].as_array().expect("jobs[]");
    let bytes: f64 = jobs
        .iter()
        .map(|j| j["read"]["io_bytes"].as_f64().expect("io_bytes"))
        .sum();
    let runtime_ms = jobs
        .iter()
        .map(|j| j["read"]["runtime"].as_f64().expect("runtime"))
        .fold(0.0, f64::max);
    let cpu = jobs
        .iter()
        .map(|j| j["usr_cpu"].as_f64().unwrap_or(0.0) + j["sys_cpu"].as_f64().unwrap_or(0.0))
        .sum();
    (bytes / 1e6 / (runtime_ms / 1e3).max(1e-9), cpu)
}

/// "Several disks in parallel, direct against buffered, with CPU use": one reader per loop
/// device, against fio with one job per device on the same devices.
#[tokio::test]
async fn sequential_reads_several_devices_in_parallel_match_fio() {
    let _serial = SERIAL.lock().await;
    let los = [Loop::random(256), Loop::random(256), Loop::random(256)];
    let devs: Vec<&str> = los.iter().map(|l| l.dev.as_str()).collect();
    let mut args = Vec::new();
    for d in &devs {
        args.extend(["--scratch-device", d]);
    }
    let agent = Agent::start(&args);
    let fio_jobs: String = devs
        .iter()
        .enumerate()
        .map(|(i, d)| format!(" --name=d{i} --filename={d}"))
        .collect();
    for direct in [true, false] {
        // fio invalidates each file's cached pages before a job (invalidate=1, its default);
        // the agent drops caches before reads: both read from the devices, not from memory.
        let fio = format!("--rw=read --bs=1m --direct={}{fio_jobs}", u8::from(direct));
        let workload = json!({
            "kind": "sequential", "op": "read", "devices": devs, "block_bytes": 1 << 20,
            "bytes": 256u64 << 20, "direct": direct, "drop_caches": true
        });
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        let mut our_cpu = Vec::new();
        let mut their_cpu = Vec::new();
        // Five runs a side: one fio run fell to 842 MB/s against ~1,800 with three.
        for _ in 0..ROUNDS {
            let (mb_s, cpu) = fio_read_mb_s_and_cpu(&fio_json(&fio));
            theirs.push(mb_s);
            their_cpu.push(cpu);
            let r = agent.run(workload.clone()).await;
            let m = &r.metrics;
            assert_eq!(m["bytes"], (3 * (256u64 << 20)) as f64, "{m:?}");
            assert_eq!(m["requests"], 3.0 * 256.0);
            let per_device = &r.series["device_mb_s"].samples;
            assert_eq!(per_device.len(), 3);
            for (i, rate) in per_device.iter().enumerate() {
                assert_eq!(m[&format!("dev{i}_mb_s")], *rate);
                assert!(*rate > 0.0, "{m:?}");
            }
            // Each device's rate is over its own time, the total over the longest: the
            // total cannot exceed the sum.
            assert!(per_device.iter().sum::<f64>() >= m["mb_s"] * 0.999, "{m:?}");
            assert!(m["cpu_pct"] > 0.0, "{m:?}");
            assert!((m["cpu_us_pct"] + m["cpu_sy_pct"] - m["cpu_pct"]).abs() < 1e-9);
            assert!((m["mb_s_per_cpu_pct"] - m["mb_s"] / m["cpu_pct"]).abs() < 1e-9);
            // The snapshot describes every scratch device's queue.
            let sys = r.system.as_ref().expect("snapshot");
            for d in &devs {
                let name = d.trim_start_matches("/dev/");
                assert!(sys.devices.iter().any(|q| q.name == name), "{sys:?}");
            }
            ours.push(m["mb_s"]);
            our_cpu.push(m["cpu_pct"]);
        }
        let what = if direct { "direct" } else { "buffered" };
        eprintln!(
            "3 devices, {what}: CPU% agent {:.0}, fio {:.0}",
            median(our_cpu),
            median(their_cpu)
        );
        assert_close(
            &format!("3 loop devices in parallel, 1 MiB {what} reads"),
            ours,
            theirs,
        );
    }
}

/// `vm.drop_caches` really empties the cache: a file read right after it was written comes
/// from memory without the drop and from the device with it, as the device's own read counter
/// (`/sys/block/loopN/stat`) shows.
#[tokio::test]
async fn drop_caches_makes_reads_go_to_the_device() {
    let _serial = SERIAL.lock().await;
    let fs = common::Mounted::ext4(256);
    let agent = Agent::start_in(fs.dir.path(), &[]);
    const FILE: u64 = 32 << 20;
    let read = |drop_caches: bool| {
        json!({
            "kind": "sequential", "op": "read", "block_bytes": 1 << 20, "bytes": FILE,
            "direct": false, "drop_caches": drop_caches
        })
    };
    let sectors = FILE / 512;
    // The run writes the file, fsyncs it, then reads it: without the drop, from page cache.
    let before = fs.lo.sectors_read();
    agent.run(read(false)).await;
    let cached = fs.lo.sectors_read() - before;
    eprintln!("without drop_caches: {cached} sectors read of {sectors}");
    assert!(cached < sectors / 10, "{cached} of {sectors} sectors read");

    let before = fs.lo.sectors_read();
    agent.run(read(true)).await;
    let dropped = fs.lo.sectors_read() - before;
    eprintln!("with drop_caches: {dropped} sectors read of {sectors}");
    // The whole file plus a little metadata; readahead stops at the end of the file.
    assert!(
        dropped >= sectors * 95 / 100 && dropped <= sectors * 3 / 2,
        "{dropped} sectors read for a {sectors}-sector file"
    );
}

/// A fio job on the scratch device: the agent names the device, the job names no path; the
/// byte count is the device's size and the rate matches dd's on the same device.
#[tokio::test]
async fn fio_job_on_the_scratch_device_matches_dd() {
    let _serial = SERIAL.lock().await;
    // 1 GiB: 64 MiB took dd 30 ms, too short to time against a loaded box, and 256 MiB (85 ms
    // at 3 GB/s) still gave fio 2983 MB/s against dd's best of five 1474 once, with a kernel
    // test's TCG VM and a build on both cores (issue 38): a run that short is a few scheduler
    // slices, and which side loses them is chance. A third of a second averages them out.
    const MIB: u64 = 1024;
    let lo = Loop::random(MIB);
    let agent = Agent::start(&["--scratch-device", &lo.dev]);
    let job = "[r]\nrw=read\nbs=64k\ndirect=1\n";
    let dd = format!("if={} of=/dev/null bs=64k iflag=direct", lo.dev);
    let _warm = dd_mb_s(&dd);
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..ROUNDS {
        theirs.push(dd_mb_s(&dd));
        let r = agent
            .run(json!({ "kind": "fio", "job": job, "device": lo.dev }))
            .await;
        // No size= in the job: fio reads the whole device.
        assert_eq!(
            r.metrics["read_bytes"],
            (MIB << 20) as f64,
            "{:?}",
            r.metrics
        );
        assert_eq!(r.metrics["write_bytes"], 0.0);
        assert!(r.metrics["read_clat_p50_ms"] <= r.metrics["read_clat_max_ms"]);
        ours.push(r.metrics["read_mb_s"]);
    }
    assert_close(
        "fio 64 KiB O_DIRECT reads of the scratch device",
        ours,
        theirs,
    );

    let other = agent
        .post_run(json!({ "kind": "fio", "job": job, "device": "/dev/loop-not-mine" }))
        .await;
    assert_eq!(other.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let named = agent
        .post_run(json!({ "kind": "fio", "job": format!("[r]\nfilename={}\n", lo.dev) }))
        .await;
    assert_eq!(named.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

/// Buffered streaming writes of a file, flushed at the end, against dd conv=fdatasync.
///
/// Both write into a fresh ext4 on a loop device over tmpfs, a new file in a new directory
/// each round, removed after, of the agent's 0xa5 bytes. On this machine's virtual disk the
/// comparison measured the disk, not the agent: it takes blocks it has been given before at
/// ~2 GB/s and new ones at ~150 MB/s, so dd overwriting one fixed file with zeros ran at 2 GB/s
/// while the agent's fresh files ran at 100-1400 MB/s (best of five 420 against 2280 on an idle
/// machine; CI, issue 38), and with fresh files on both sides the best of five still differed by
/// 2.2x. Most of that was this VM's memory, not its disk (see [`WARM_ROUNDS`]); tmpfs under
/// the loop device keeps ext4, the page cache and writeback real and takes the disk out. dd
/// also copies its source, so it runs ~1.4x slower than the agent here (3.3 against 2.5 GB/s
/// idle, 1.9 against 1.4 with both cores busy).
#[tokio::test]
async fn sequential_buffered_writes_match_dd() {
    let _serial = SERIAL.lock().await;
    let fs = Mounted::ext4(512);
    let agent = Agent::start_in(fs.dir.path(), &[]);
    let tmp = fs.dir.path();
    let source = Path::new("/dev/shm").join(format!("firstbad-a5-{}", std::process::id()));
    std::fs::write(&source, vec![0xa5u8; 64 << 20]).expect("write dd's source");
    let workload = json!({
        "kind": "sequential", "op": "write", "block_bytes": 1 << 20, "bytes": 64u64 << 20
    });
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for round in 0..WARM_ROUNDS + ROUNDS {
        let fresh = tmp.join(format!("round{round}"));
        std::fs::create_dir(&fresh).expect("dd's directory");
        theirs.push(dd_mb_s(&format!(
            "if={} of={} bs=1M count=64 conv=fdatasync",
            source.display(),
            fresh.join("data").display()
        )));
        std::fs::remove_dir_all(&fresh).expect("remove dd's file");
        let r = agent.run(workload.clone()).await;
        assert_eq!(r.metrics["bytes"], (64u64 << 20) as f64);
        ours.push(r.metrics["mb_s"]);
    }
    let ours = ours.split_off(WARM_ROUNDS);
    let theirs = theirs.split_off(WARM_ROUNDS);
    let _ = std::fs::remove_file(&source);
    assert_close("1 MiB buffered writes", ours, theirs);
}

/// tiobench-like: 4 threads reading their own files with O_DIRECT, against fio's numjobs=4.
#[tokio::test]
async fn threads_direct_reads_match_fio() {
    let _serial = SERIAL.lock().await;
    let agent = Agent::start(&[]);
    let fio_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tmp");
    let fio = |dir: &Path| {
        let out = sh(&format!(
            "cd {} && fio --output-format=json --name=r --rw=read --bs=64k --size=16m \
             --numjobs=4 --direct=1 --group_reporting",
            dir.display()
        ));
        let start = out.find('{').expect("fio JSON");
        let v: Value = serde_json::from_str(&out[start..]).expect("fio JSON parses");
        v["jobs"][0]["read"]["bw_bytes"].as_f64().expect("bw_bytes") / 1e6
    };
    let workload = json!({
        "kind": "threads", "threads": 4, "op": "read", "file_bytes": 16u64 << 20,
        "block_bytes": 65536, "direct": true,
        // fio does not drop caches either (see the loop device test).
        "drop_caches": false
    });
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..ROUNDS {
        theirs.push(fio(fio_dir.path()));
        let r = agent.run(workload.clone()).await;
        assert_eq!(r.series["thread_mb_s"].samples.len(), 4);
        assert_eq!(r.series["request_latency"].samples.len(), 4 * 256);
        assert_eq!(r.metrics["over_10s_pct"], 0.0);
        assert!(r.metrics["cpu_pct"] > 0.0 && r.metrics["mb_s_per_cpu_pct"] > 0.0);
        ours.push(r.metrics["total_mb_s"]);
    }
    assert_close("4 threads x 64 KiB O_DIRECT reads", ours, theirs);
}

/// A fio job with an fsync after every write: the byte count is exact and the sync block maps.
#[tokio::test]
async fn fio_job_maps_bandwidth_and_fsync_latency() {
    let _serial = SERIAL.lock().await;
    let agent = Agent::start(&[]);
    let job = "[global]\nbs=4k\n[w]\nrw=write\nsize=2m\nfsync=1\n";
    let r = agent.run(json!({ "kind": "fio", "job": job })).await;
    let m = &r.metrics;
    assert_eq!(m["write_bytes"], (2u64 << 20) as f64);
    assert_eq!(m["read_bytes"], 0.0);
    // 512 writes in write_bytes / write_mb_s seconds: the iops must agree with the bandwidth.
    let secs = m["write_bytes"] / 1e6 / m["write_mb_s"];
    assert!(
        ((512.0 / secs) / m["write_iops"] - 1.0).abs() < 0.1,
        "{m:?}"
    );
    assert!(m["sync_lat_p50_ms"] > 0.0, "{m:?}");
    assert!(m["sync_lat_p50_ms"] <= m["sync_lat_p99_ms"]);
    assert!(m["sync_lat_p99_ms"] <= m["sync_lat_max_ms"]);

    let refused = agent
        .post_run(json!({ "kind": "fio", "job": "[w]\nfilename=/dev/vda\n" }))
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

/// A user's script: dd's own timing read with a named regex; refused without the flag.
#[tokio::test]
async fn command_takes_metrics_from_a_regex_and_needs_allow_command() {
    let _serial = SERIAL.lock().await;
    let workload = json!({
        "kind": "command",
        "script": "dd if=/dev/zero of=f bs=1M count=16 conv=fdatasync 2>&1",
        // dd prints "... copied, 0.0123 s, 1.4 GB/s": the seconds always have the same unit.
        "metrics": { "from": "regex", "pattern": r"copied, (?P<dd_s>[0-9.e-]+) s," }
    });
    let locked = Agent::start(&[]);
    let resp = locked.post_run(workload.clone()).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = resp.json().await.expect("error body");
    assert!(body["error"]
        .as_str()
        .unwrap_or("")
        .contains("--allow-command"));

    let agent = Agent::start(&["--allow-command"]);
    let r = agent.run(workload).await;
    assert_eq!(r.series["dd_s"].samples.len(), 1);
    assert!(
        r.metrics["dd_s"] > 0.0 && r.metrics["dd_s"] < 60.0,
        "{:?}",
        r.metrics
    );
    let lines = agent
        .run(json!({
            "kind": "command", "script": "echo '{\"x\": 1}'; echo '{\"x\": 3}'",
            "metrics": { "from": "json-lines" }
        }))
        .await;
    assert_eq!(lines.metrics["x"], 2.0);
}

/// A cancelled threads run stops at once and leaves no file behind; a second run gets 409.
#[tokio::test]
async fn a_cancelled_threads_run_cleans_up() {
    let _serial = SERIAL.lock().await;
    let agent = Agent::start(&[]);
    let long = json!({
        "kind": "threads", "threads": 8, "op": "write", "pattern": "random",
        "file_bytes": 256u64 << 20, "block_bytes": 512
    });
    let resp = agent.post_run(long.clone()).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let started: RunStarted = resp.json().await.expect("RunStarted");
    assert_eq!(agent.post_run(long).await.status(), StatusCode::CONFLICT);
    // Cancel once the threads have created their files.
    agent.wait_for_run_files(Duration::from_secs(10)).await;
    let status: RunStatus = agent
        .http
        .post(format!("{}/v1/runs/{}/cancel", agent.base, started.id))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("cancel")
        .json()
        .await
        .expect("RunStatus");
    assert_eq!(status.state, RunState::Cancelled);
    assert!(agent.scratch_entries().is_empty());
}

/// Every workload file in workloads/ parses as a workload (unknown keys are refused).
#[test]
fn every_workload_file_parses() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../workloads");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("workloads/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).expect("read");
            let parsed: Result<firstbad_wire::Workload, _> = toml::from_str(&text);
            assert!(parsed.is_ok(), "{}: {parsed:?}", path.display());
            n += 1;
        }
    }
    assert!(n >= 6, "only {n} workload files");
}
