//! Each metric format read from the real output of its real tool, made here in a tempdir:
//! hyperfine, Google Benchmark (compiled with g++), pytest-benchmark (Debian's, under
//! /usr/bin/python3), `perf stat -x,` and criterion (a crate built with cargo). The tools come
//! from scripts/install-deps; a missing tool fails the test rather than skipping it, since a
//! skipped test would claim support nobody checked.
//!
//! Timings are asserted against bounds the tools cannot cross (a `sleep 0.01` takes at least
//! 10 ms) and, where the tool writes its own summary, against that summary (Google Benchmark's
//! `_mean` aggregate, pytest-benchmark's mean, criterion's mean estimate), so that a reader
//! taking the wrong number, unit or sample list fails.

use firstbad::metric::{read, Format, MetricSpec, Reading};
use std::path::Path;
use std::process::Command;

fn spec(format: Format, benchmark: Option<&str>, field: &str) -> MetricSpec {
    MetricSpec {
        format,
        benchmark: benchmark.map(str::to_string),
        field: field.to_string(),
    }
}

/// Runs a tool, failing the test with its stderr when it cannot start or fails.
fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} did not start ({e}): run scripts/install-deps"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Reads an output file as a hunt does: its text, and its directory as `beside`.
fn read_file(spec: &MetricSpec, path: &Path) -> Result<Reading, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    read(spec, &text, path.parent())
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// `a` and `b` agree to the digits the tools print (%.17g, Python's repr: 1e-9 is loose).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

// hyperfine 1.15 (Debian 12) has -N (--shell=none), so the times are the commands' own.
#[test]
fn hyperfine_two_commands_read_by_command_with_times_as_samples() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hf.json");
    run(Command::new("hyperfine")
        .args(["-N", "--runs", "5", "--export-json"])
        .arg(&out)
        .args(["sleep 0.01", "sleep 0.02"]));
    for (command, seconds) in [("sleep 0.01", 0.01), ("sleep 0.02", 0.02)] {
        let r = read_file(&spec(Format::Hyperfine, Some(command), "mean"), &out).unwrap();
        assert_eq!(r.samples.len(), 5, "{command}: --runs 5");
        // A sleep never ends early; a second of slack covers a loaded CI machine.
        assert!(
            r.value >= seconds && r.value < seconds + 1.0,
            "{command}: mean {} s",
            r.value
        );
        assert!(r.samples.iter().all(|t| *t >= seconds), "{:?}", r.samples);
        assert!(
            close(r.value, mean(&r.samples)),
            "hyperfine's mean is of its times"
        );
        assert_eq!((r.unit.as_deref(), r.format), (Some("s"), "hyperfine"));
        let auto = read_file(&spec(Format::Auto, Some(command), "mean"), &out).unwrap();
        assert_eq!(auto, r, "Auto detects hyperfine");
    }
    let err = read_file(&spec(Format::Hyperfine, None, "mean"), &out).unwrap_err();
    assert_eq!(
        err,
        "hyperfine output holds 2 benchmarks (\"sleep 0.01\", \"sleep 0.02\"): set metric.benchmark"
    );
}

#[test]
fn hyperfine_one_command_needs_no_benchmark_and_command_name_picks_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hf.json");
    run(Command::new("hyperfine")
        .args([
            "-N",
            "--runs",
            "3",
            "--command-name",
            "nap",
            "--export-json",
        ])
        .arg(&out)
        .arg("sleep 0.01"));
    let r = read_file(&spec(Format::Hyperfine, None, "median"), &out).unwrap();
    assert!(r.value >= 0.01 && r.value < 1.01, "median {} s", r.value);
    assert_eq!(r.samples.len(), 3);
    let named = read_file(&spec(Format::Hyperfine, Some("nap"), "median"), &out).unwrap();
    assert_eq!(named, r, "--command-name replaces the command");
    let err = read_file(&spec(Format::Hyperfine, Some("sleep 0.01"), "mean"), &out).unwrap_err();
    assert!(err.contains("it has \"nap\""), "{err}");
}

const GOOGLE_BENCHMARK: &str = r#"
#include <benchmark/benchmark.h>
static void BM_sum(benchmark::State& state) {
  for (auto _ : state) {
    int s = 0;
    for (int i = 0; i < 1000; ++i) benchmark::DoNotOptimize(s += i);
  }
  state.counters["widgets"] = 42;
}
BENCHMARK(BM_sum);
static void BM_other(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(state.range(0) * 2);
}
BENCHMARK(BM_other)->Arg(8);
BENCHMARK_MAIN();
"#;

// libbenchmark 1.7.1 (Debian 12) takes --benchmark_min_time as seconds without a suffix.
#[test]
fn google_benchmark_repetitions_are_samples_of_the_named_benchmark() {
    let dir = tempfile::tempdir().unwrap();
    let (source, binary, file) = (
        dir.path().join("x.cc"),
        dir.path().join("x"),
        dir.path().join("gb.json"),
    );
    std::fs::write(&source, GOOGLE_BENCHMARK).unwrap();
    run(Command::new("g++")
        .arg("-O2")
        .arg(&source)
        .args(["-lbenchmark", "-lpthread", "-o"])
        .arg(&binary));
    let stdout = run(Command::new(&binary)
        .args([
            "--benchmark_format=json",
            "--benchmark_repetitions=3",
            "--benchmark_min_time=0.01",
            "--benchmark_out_format=json",
        ])
        .arg(format!("--benchmark_out={}", file.display())));

    let real = |benchmark: &str, field: &str| {
        read(
            &spec(Format::GoogleBenchmark, Some(benchmark), field),
            &stdout,
            None,
        )
    };
    let r = real("BM_sum", "real_time").unwrap();
    assert_eq!(r.samples.len(), 3, "--benchmark_repetitions=3");
    assert!(r.value > 0.0 && r.samples.iter().all(|t| *t > 0.0), "{r:?}");
    assert_eq!(r.unit.as_deref(), Some("ns"));
    // The library's own mean of the repetitions is the `_mean` aggregate, read by its name.
    let aggregate = real("BM_sum_mean", "real_time").unwrap();
    assert!(close(r.value, aggregate.value), "{r:?} vs {aggregate:?}");
    assert!(aggregate.samples.is_empty());
    let widgets = real("BM_sum", "widgets").unwrap();
    assert_eq!((widgets.value, widgets.unit), (42.0, None));
    assert!(real("BM_other/8", "cpu_time").unwrap().value > 0.0);

    let err = read(
        &spec(Format::GoogleBenchmark, None, "real_time"),
        &stdout,
        None,
    )
    .unwrap_err();
    assert!(
        err.contains("2 benchmarks (\"BM_sum\", \"BM_other/8\")"),
        "{err}"
    );
    let err = real("BM_sum", "wall_time").unwrap_err();
    assert!(
        err.contains("real_time") && err.contains("widgets"),
        "{err}"
    );

    // --benchmark_out writes the same document to a file; Auto tells it from pytest's.
    let from_file = read_file(&spec(Format::Auto, Some("BM_sum"), "cpu_time"), &file).unwrap();
    assert_eq!(
        (from_file.format, from_file.samples.len()),
        ("google-benchmark", 3)
    );
}

const PYTEST_BENCHMARK: &str = "
def f(n):
    return sum(range(n))

def test_small(benchmark):
    benchmark(f, 100)

def test_big(benchmark):
    benchmark(f, 10000)
";

// Debian's python3-pytest-benchmark is for /usr/bin/python3, not a pyenv python3 on PATH.
#[test]
fn pytest_benchmark_reads_a_test_by_name_or_fullname_with_its_rounds() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("test_pb.py"), PYTEST_BENCHMARK).unwrap();
    // Its own ini file makes the tempdir pytest's rootdir, whatever lies above it.
    std::fs::write(dir.path().join("pytest.ini"), "[pytest]\n").unwrap();
    let out = dir.path().join("pb.json");
    run(Command::new("/usr/bin/python3")
        .current_dir(dir.path())
        .env_remove("PYTHONPATH")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_pb.py"])
        .arg(format!("--benchmark-json={}", out.display()))
        .args(["--benchmark-min-rounds=5", "--benchmark-max-time=0.05"]));

    let small = read_file(
        &spec(Format::PytestBenchmark, Some("test_small"), "mean"),
        &out,
    )
    .unwrap();
    assert!(small.samples.len() >= 5, "--benchmark-min-rounds=5");
    // Summing 100 ints takes microseconds; 10 ms would be a unit mistake.
    assert!(small.value > 0.0 && small.value < 0.01, "{}", small.value);
    assert!(
        close(small.value, mean(&small.samples)),
        "pytest-benchmark's mean is of stats.data"
    );
    assert_eq!(small.unit.as_deref(), Some("s"));
    let big = read_file(
        &spec(Format::Auto, Some("test_pb.py::test_big"), "median"),
        &out,
    )
    .unwrap();
    assert_eq!(
        big.format, "pytest-benchmark",
        "Auto detects pytest-benchmark"
    );
    assert!(
        big.value > small.value,
        "100x the work: {big:?} vs {small:?}"
    );
    let ops = read_file(
        &spec(Format::PytestBenchmark, Some("test_small"), "ops"),
        &out,
    )
    .unwrap();
    assert!(close(ops.value * small.value, 1.0), "ops is 1 / mean");
    assert_eq!((ops.unit, ops.samples.len()), (None, 0));

    let err = read_file(&spec(Format::PytestBenchmark, None, "mean"), &out).unwrap_err();
    assert!(
        err.contains("2 benchmarks")
            && err.contains("test_pb.py::test_small")
            && err.contains("test_pb.py::test_big"),
        "{err}"
    );
}

fn perf_stat(dir: &Path, args: &[&str], command: &[&str]) -> std::path::PathBuf {
    let out = dir.join(format!("perf-{}.csv", args.join("").replace(' ', "")));
    run(Command::new("perf")
        .args(["stat", "-x,"])
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .args(command));
    out
}

#[test]
fn perf_stat_task_clock_once_and_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let once = perf_stat(dir.path(), &["-e", "task-clock"], &["sleep", "0.01"]);
    let r = read_file(&spec(Format::PerfStat, None, "task-clock"), &once).unwrap();
    // task-clock counts CPU time, and a sleep hardly uses any: well under its 10 ms.
    assert!(r.value > 0.0 && r.value < 1000.0, "{} msec", r.value);
    assert_eq!((r.unit.as_deref(), r.samples.len()), (Some("msec"), 0));
    let auto = read_file(&spec(Format::Auto, None, "task-clock"), &once).unwrap();
    assert_eq!(auto, r, "Auto detects perf stat");

    let repeated = perf_stat(
        dir.path(),
        &["-r", "3", "-e", "task-clock"],
        &["sleep", "0.01"],
    );
    let r = read_file(&spec(Format::PerfStat, None, "task-clock"), &repeated).unwrap();
    assert!(r.value > 0.0 && r.value < 1000.0, "{} msec", r.value);
    assert!(r.samples.is_empty(), "-r writes the mean only");
    let err = read_file(&spec(Format::PerfStat, None, "page-faults"), &repeated).unwrap_err();
    assert!(err.contains("it has task-clock"), "{err}");
}

#[test]
fn perf_stat_intervals_are_samples() {
    let dir = tempfile::tempdir().unwrap();
    // A busy loop of 0.35 s: every 100 ms interval counts CPU time.
    let busy = "import time\nt = time.time()\nwhile time.time() - t < 0.35: pass";
    let out = perf_stat(
        dir.path(),
        &["-I", "100", "-e", "task-clock"],
        &["/usr/bin/python3", "-c", busy],
    );
    let r = read_file(&spec(Format::PerfStat, None, "task-clock"), &out).unwrap();
    assert!(r.samples.len() >= 3, "{r:?}");
    // One thread in a 100 ms interval uses at most ~100 ms; perf's intervals overrun a little.
    assert!(r.samples.iter().all(|ms| *ms > 0.0 && *ms < 200.0), "{r:?}");
}

#[test]
fn perf_stat_hardware_counter_is_read_or_refused_as_not_supported() {
    let dir = tempfile::tempdir().unwrap();
    let out = perf_stat(dir.path(), &["-e", "cycles"], &["sleep", "0.01"]);
    // VMs (this one, most CI runners) have no PMU; a machine that has one counts cycles.
    match read_file(&spec(Format::PerfStat, None, "cycles"), &out) {
        Ok(r) => assert!(r.value.is_finite() && r.value > 0.0, "{r:?}"),
        Err(err) => assert!(err.contains("<not supported>"), "{err}"),
    }
}

const CRITERION_MANIFEST: &str = r#"[package]
name = "criterion-fixture"
version = "0.1.0"
edition = "2021"
publish = false

# Not a member of any workspace above the tempdir.
[workspace]

# No plots and no rayon: less to build, and the estimates are the same.
[dev-dependencies]
criterion = { version = "0.5", default-features = false, features = ["cargo_bench_support"] }

[[bench]]
name = "b"
harness = false
"#;

const CRITERION_BENCH: &str = r#"
use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn sum(c: &mut Criterion) {
    let v: Vec<u64> = (0..1000).collect();
    c.bench_function("sum_1000", |b| b.iter(|| black_box(&v).iter().sum::<u64>()));
}

criterion_group!(benches, sum);
criterion_main!(benches);
"#;

// The crate is built in a target dir in the machine's firstbad cache (where the kernels are
// shared too), so a warm machine does not compile criterion again, a fresh clone included (CI
// clones afresh: under CARGO_TARGET_TMPDIR the compile cost 60 s of every run); the results go
// to the tempdir through CRITERION_HOME, so a stale run's estimates are never read.
#[test]
fn criterion_estimates_with_sample_json_beside() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Cargo.toml"), CRITERION_MANIFEST).unwrap();
    std::fs::create_dir_all(dir.path().join("benches")).unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "").unwrap();
    std::fs::write(dir.path().join("benches/b.rs"), CRITERION_BENCH).unwrap();
    let home = dir.path().join("criterion");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    run(Command::new(cargo)
        .current_dir(dir.path())
        .env(
            "CARGO_TARGET_DIR",
            firstbad::config::default_cache_dir().join("criterion-fixture-target"),
        )
        .env("CRITERION_HOME", &home)
        .args(["bench", "--bench", "b", "--"])
        .args([
            "--warm-up-time",
            "0.1",
            "--measurement-time",
            "0.3",
            "--noplot",
        ]));

    let new = home.join("sum_1000/new");
    let estimates = new.join("estimates.json");
    let r = read_file(&spec(Format::Criterion, None, "mean"), &estimates).unwrap();
    // criterion's default sample size.
    assert_eq!(r.samples.len(), 100, "one per sample in sample.json");
    // Summing 1000 u64 takes nanoseconds to a few microseconds, never a millisecond.
    assert!(r.value > 0.0 && r.value < 1e6, "{} ns", r.value);
    assert!(
        close(r.value, mean(&r.samples)),
        "criterion's mean estimate is the mean of the per-iteration times: {} vs {}",
        r.value,
        mean(&r.samples)
    );
    assert_eq!((r.unit.as_deref(), r.format), (Some("ns"), "criterion"));

    let named = read_file(&spec(Format::Auto, Some("sum_1000"), "median"), &estimates).unwrap();
    assert_eq!(named.format, "criterion", "Auto detects criterion");
    assert!(named.value > 0.0 && named.value < 1e6);
    let err = read_file(&spec(Format::Criterion, Some("sum_10"), "mean"), &estimates).unwrap_err();
    assert!(err.contains("\"sum_1000\""), "{err}");
    let err = read_file(&spec(Format::Criterion, None, "mean_ns"), &estimates).unwrap_err();
    assert_eq!(
        err,
        "no field \"mean_ns\" in criterion estimates; it has mean, median, std_dev, slope, \
         median_abs_dev"
    );
}
