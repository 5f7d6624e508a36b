//! `firstbad-agent run`, the one-shot mode of LAVA farm devices, as the orchestrator sees it:
//! the real binary's stdout read back with `firstbad_wire::oneshot::Decoder`.

mod common;
use common::TOKEN;
use firstbad_wire::oneshot::{Decoder, MAX_LINE_BYTES, PREFIX, RESULT_PREFIX};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The API tests' small fsync-latency run: 20 fsyncs under one 8 MiB writer, well under 1 s.
fn small_run() -> Value {
    json!({
        "kind": "fsync-latency", "writers": 1, "writer_bytes": 8 << 20,
        "writer_block_bytes": 65536, "append_bytes": 4096, "fsyncs": 20, "interval_ms": 1,
        "warmup_ms": 50
    })
}

/// A scratch directory and a workload file beside it, in the target dir (a real file system).
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(workload: &str) -> Setup {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
        std::fs::create_dir(dir.path().join("scratch")).expect("scratch");
        std::fs::write(dir.path().join("workload.json"), workload).expect("workload file");
        Setup { dir }
    }

    fn scratch(&self) -> std::path::PathBuf {
        self.dir.path().join("scratch")
    }

    /// `firstbad-agent run --workload … --scratch …` with `token_args`.
    fn run(&self, token_args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_firstbad-agent"))
            .arg("run")
            .arg("--workload")
            .arg(self.dir.path().join("workload.json"))
            .arg("--scratch")
            .arg(self.scratch())
            .args(token_args)
            .output()
            .expect("run firstbad-agent")
    }
}

/// Feeds stdout to a decoder for `token`, line by line, as the orchestrator reads the console.
fn decode(out: &Output, token: &str) -> Decoder {
    let mut decoder = Decoder::new(token);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        decoder.line(line);
    }
    decoder
}

fn uname_r() -> String {
    let out = Command::new("uname").arg("-r").output().expect("uname -r");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn run_prints_a_result_the_orchestrator_decodes() {
    let setup = Setup::new(&small_run().to_string());
    // A run directory left by an agent killed mid-run is removed first.
    let stale = setup.scratch().join("firstbad-run-oneshot");
    std::fs::create_dir(&stale).expect("stale run dir");
    std::fs::write(stale.join("foreground"), b"old").expect("stale file");
    let token_file = setup.dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("token file");

    let out = setup.run(&["--token-file", token_file.to_str().expect("utf-8 path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");

    let decoder = decode(&out, TOKEN);
    let identity = decoder.identity().expect("identity line");
    assert_eq!(identity.kernel_release, uname_r());
    assert_eq!(identity.protocol, firstbad_wire::PROTOCOL_VERSION);
    let result = decoder
        .outcome()
        .expect("an end line")
        .unwrap_or_else(|e| panic!("error outcome {e}; stderr: {stderr}"));
    assert_eq!(result.kind, "fsync-latency");
    assert_eq!(result.series["fsync_latency"].samples.len(), 20);
    for metric in [
        "fsync_latency_p50_ms",
        "fsync_latency_p99_ms",
        "fsync_latency_max_ms",
        "writer_mb_s",
    ] {
        let value = result.metrics.get(metric).copied();
        assert!(value.is_some_and(|v| v > 0.0), "{metric}: {value:?}");
    }
    assert!(result.system.is_some(), "every run has a system snapshot");

    // stdout holds the protocol's lines only (logs are on stderr), each whole and short, and
    // one LAVA result line per metric.
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        assert!(
            line.starts_with(PREFIX) || line.starts_with(RESULT_PREFIX),
            "{line}"
        );
        assert!(line.len() <= MAX_LINE_BYTES, "{} bytes: {line}", line.len());
    }
    let lava = stdout
        .lines()
        .filter(|l| l.starts_with(RESULT_PREFIX))
        .count();
    assert_eq!(lava, result.metrics.len(), "{stdout}");
    assert!(stderr.contains("run started"), "{stderr}");

    // The scratch directory is left empty, the stale run with it.
    let left: Vec<_> = std::fs::read_dir(setup.scratch())
        .expect("read scratch")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_run_that_does_not_fit_in_scratch_prints_an_error_and_exits_1() {
    let mut workload = small_run();
    workload["writer_bytes"] = json!(1u64 << 60);
    let setup = Setup::new(&workload.to_string());
    let out = setup.run(&["--token", TOKEN]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = decode(&out, TOKEN);
    assert!(
        decoder.identity().is_some(),
        "the identity line comes first"
    );
    let err = decoder.outcome().expect("an error line").unwrap_err();
    assert!(
        err.contains("MiB free") && err.contains("fsync-latency"),
        "{err}"
    );
    // Another boot's decoder sees nothing in this output.
    let other = decode(&out, "another-boots-token");
    assert!(other.identity().is_none() && other.outcome().is_none());
}

#[test]
fn an_invalid_workload_file_is_an_error_line_that_names_it() {
    let refused = json!({
        "kind": "fsync-latency", "writers": 1, "writer_bytes": 1 << 20,
        "writer_block_bytes": 0, "append_bytes": 4096, "fsyncs": 1, "interval_ms": 0
    });
    for (workload, expected) in [
        (r#"{"kind": "disk-melter"}"#.to_owned(), "disk-melter"),
        ("{not json".to_owned(), "not a workload"),
        // Parses, but the agent refuses it as the server would (422 there).
        (refused.to_string(), "writer_block_bytes"),
    ] {
        let setup = Setup::new(&workload);
        let out = setup.run(&["--token", TOKEN]);
        assert_eq!(out.status.code(), Some(1), "{workload}");
        let err = decode(&out, TOKEN)
            .outcome()
            .expect("an error line")
            .unwrap_err();
        assert!(err.contains(expected), "{workload}: {err}");
        if expected == "not a workload" {
            assert!(err.contains("workload.json"), "{err}");
        }
    }
}

#[test]
fn a_token_that_cannot_tag_a_line_prints_nothing_and_exits_2() {
    let setup = Setup::new(&small_run().to_string());
    for token in ["two words", &"x".repeat(65)] {
        let out = setup.run(&["--token", token]);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("cannot tag console lines"), "{stderr}");
    }
    // Nothing ran: the scratch directory is untouched.
    assert!(std::fs::read_dir(setup.scratch())
        .expect("scratch")
        .next()
        .is_none());
}

/// Issue 32, finding 5: `--workload` was read whole whatever it named: `/dev/zero` to 545 MB,
/// and a FIFO blocked the run for good. Anything but a regular file is refused without a
/// read, and a regular file past the bound of a `POST /v1/runs` body is refused too; each
/// with an error line naming the file.
#[test]
fn a_workload_that_is_not_a_small_regular_file_is_refused_without_reading_it() {
    let setup = Setup::new(&small_run().to_string());
    let dir = setup.dir.path();
    let fifo = dir.join("workload.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", fifo.display());
    // Valid JSON all the same: the spaces are whitespace.
    let big = dir.join("big.json");
    std::fs::write(&big, format!("{}{}", " ".repeat(1 << 20), small_run())).expect("big");
    for (path, expected) in [
        (
            Path::new("/dev/zero"),
            "a character device, not a regular file",
        ),
        (fifo.as_path(), "a FIFO, not a regular file"),
        (dir, "a directory, not a regular file"),
        (big.as_path(), "more than 65536 bytes"),
    ] {
        let child = Command::new(env!("CARGO_BIN_EXE_firstbad-agent"))
            .arg("run")
            .arg("--workload")
            .arg(path)
            .arg("--scratch")
            .arg(setup.scratch())
            .args(["--token", TOKEN])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run firstbad-agent");
        let out = within_20_s(child, &format!("--workload {}", path.display()));
        assert_eq!(out.status.code(), Some(1), "{}", path.display());
        let err = decode(&out, TOKEN)
            .outcome()
            .expect("an error line")
            .unwrap_err();
        assert!(
            err.contains(expected) && err.contains(&path.display().to_string()),
            "{}: {err}",
            path.display()
        );
    }
}

/// Issue 61, finding 5: `--token-file /dev/zero` was read until the agent ran out of memory,
/// and a FIFO waited for a writer for good. Only a small regular file is read as the token.
#[test]
fn a_token_file_that_is_not_a_small_regular_file_is_refused_without_reading_it() {
    let setup = Setup::new(&small_run().to_string());
    let dir = setup.dir.path();
    let fifo = dir.join("token.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let big = dir.join("big-token");
    std::fs::write(&big, "x".repeat(1 << 20)).expect("big");
    // The FIFO first: before the fix it hangs, where /dev/zero would take the memory.
    for (path, expected) in [
        (fifo.as_path(), "a FIFO, not a regular file"),
        (
            Path::new("/dev/zero"),
            "a character device, not a regular file",
        ),
        (big.as_path(), "more than 4096 bytes"),
    ] {
        let child = Command::new(env!("CARGO_BIN_EXE_firstbad-agent"))
            .arg("run")
            .arg("--workload")
            .arg(dir.join("workload.json"))
            .arg("--scratch")
            .arg(setup.scratch())
            .arg("--token-file")
            .arg(path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run firstbad-agent");
        let out = within_20_s(child, &format!("--token-file {}", path.display()));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: {err}", path.display());
        assert!(
            err.contains(expected) && err.contains(&path.display().to_string()),
            "{}: {err}",
            path.display()
        );
    }
}

/// The agent's output once it ends, which must be within 20 s (a file it would read for good:
/// killed, and the test fails naming `what`).
fn within_20_s(mut child: std::process::Child, what: &str) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still reading after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}
