//! `threads`: tiobench. 1 to 256 threads each read or write their own file, sequentially or at
//! random; per-thread and total MB/s, latency, the share of very slow requests, CPU efficiency.

use super::{
    add_latency_metrics, drop_caches, empty_result, open, sequential, AlignedBuf, Outcome,
    WorkloadError, XorShift,
};
use firstbad_wire::{IoOp, IoPattern, Series, Threads, WorkloadResult};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Most threads: tiobench's own upper end, and one OS thread each.
pub const MAX_THREADS: u32 = 256;
/// tiobench reports the share of requests slower than these (2 s and 10 s).
const SLOW_MS: [f64; 2] = [2_000.0, 10_000.0];

/// Checks the parameters; the error names the parameter, its value and the allowed range.
pub fn validate(p: &Threads) -> Result<(), String> {
    if !(1..=MAX_THREADS).contains(&p.threads) {
        return Err(format!(
            "threads: threads = {} is out of range 1..={MAX_THREADS}",
            p.threads
        ));
    }
    if !(1..=sequential::MAX_BLOCK_BYTES).contains(&p.block_bytes) {
        return Err(format!(
            "threads: block_bytes = {} is out of range 1..={}",
            p.block_bytes,
            sequential::MAX_BLOCK_BYTES
        ));
    }
    if p.direct && !p.block_bytes.is_multiple_of(sequential::DIRECT_UNIT) {
        return Err(format!(
            "threads: block_bytes = {} must be a multiple of {} with direct = true",
            p.block_bytes,
            sequential::DIRECT_UNIT
        ));
    }
    if p.file_bytes < u64::from(p.block_bytes) {
        return Err(format!(
            "threads: file_bytes = {} is less than one block ({})",
            p.file_bytes, p.block_bytes
        ));
    }
    Ok(())
}

/// Bytes written to scratch: every thread's file.
pub fn bytes_needed(p: &Threads) -> u64 {
    u64::from(p.threads).saturating_mul(p.file_bytes)
}

/// What one thread measured.
struct ThreadResult {
    bytes: u64,
    secs: f64,
    cpu_secs: f64,
    latencies: Vec<f64>,
}

/// Runs the workload with its files in `dir`; the caller removes `dir` afterwards.
pub fn run(p: &Threads, dir: &Path, cancel: &AtomicBool) -> Result<Outcome, WorkloadError> {
    let started = Instant::now();
    let blocks = p.file_bytes / u64::from(p.block_bytes);
    let paths: Vec<PathBuf> = (0..p.threads)
        .map(|i| dir.join(format!("thread-{i}")))
        .collect();
    let write = p.op == IoOp::Write;
    for path in &paths {
        if write {
            if p.pattern == IoPattern::Random {
                // Random writes land inside a file of the final size, as tiobench's do.
                open(path, true, false, true)?
                    .set_len(blocks * u64::from(p.block_bytes))
                    .map_err(WorkloadError::io(path, "set_len"))?;
            }
        } else {
            if !sequential::prepare(path, blocks * u64::from(p.block_bytes), cancel)? {
                return Ok(Outcome::Cancelled);
            }
            if p.drop_caches {
                drop_caches(&open(path, false, false, false)?, path)?;
            }
        }
    }
    let t0 = Instant::now();
    let results = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            let name = format!("io-{i}");
            let spawned = std::thread::Builder::new()
                .name(name.clone())
                .spawn_scoped(scope, move || one_thread(p, path, i as u64, blocks, cancel));
            match spawned {
                Ok(h) => handles.push((name, h)),
                Err(source) => {
                    return vec![Err(WorkloadError::Spawn { name, source })];
                }
            }
        }
        handles
            .into_iter()
            .map(|(name, h)| h.join().unwrap_or(Err(WorkloadError::Panicked(name))))
            .collect::<Vec<_>>()
    });
    let wall = t0.elapsed().as_secs_f64();
    let mut per_thread = Vec::new();
    for r in results {
        match r? {
            Some(r) => per_thread.push(r),
            None => return Ok(Outcome::Cancelled),
        }
    }
    Ok(Outcome::Done(summarize(
        &per_thread,
        wall,
        started.elapsed(),
    )))
}

/// One thread's loop over its file; `None` when cancelled.
fn one_thread(
    p: &Threads,
    path: &Path,
    index: u64,
    blocks: u64,
    cancel: &AtomicBool,
) -> Result<Option<ThreadResult>, WorkloadError> {
    let write = p.op == IoOp::Write;
    let create = write && p.pattern == IoPattern::Sequential;
    let file = open(path, write, p.direct, create)?;
    let mut buf = AlignedBuf::new(p.block_bytes as usize, 0xa5);
    // A different, fixed seed per thread: runs are reproducible, threads do not collide.
    let mut rng = XorShift::new(0x9e37_79b9_7f4a_7c15 ^ (index + 1));
    let mut latencies = Vec::with_capacity(blocks.min(super::MAX_SERIES_SAMPLES as u64) as usize);
    let cpu0 = thread_cpu_secs();
    let t0 = Instant::now();
    for n in 0..blocks {
        if cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let block = match p.pattern {
            IoPattern::Sequential => n,
            IoPattern::Random => rng.below(blocks),
        };
        let offset = block * u64::from(p.block_bytes);
        let t = Instant::now();
        if write {
            file.write_all_at(buf.as_slice(), offset)
                .map_err(WorkloadError::io(path, "write"))?;
        } else {
            file.read_exact_at(buf.as_mut_slice(), offset)
                .map_err(WorkloadError::io(path, "read"))?;
        }
        latencies.push(t.elapsed().as_secs_f64() * 1e3);
    }
    if write {
        file.sync_data()
            .map_err(WorkloadError::io(path, "fdatasync"))?;
    }
    Ok(Some(ThreadResult {
        bytes: blocks * u64::from(p.block_bytes),
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: thread_cpu_secs() - cpu0,
        latencies,
    }))
}

/// User plus system CPU time of the calling thread, in seconds.
fn thread_cpu_secs() -> f64 {
    // SAFETY: rusage is plain old data; all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is writable for the duration of the call.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// tiobench's figures: total MB/s over the wall time, per-thread MB/s, latencies, CPU use.
fn summarize(threads: &[ThreadResult], wall: f64, duration: Duration) -> WorkloadResult {
    let bytes: u64 = threads.iter().map(|t| t.bytes).sum();
    let total_mb_s = bytes as f64 / 1e6 / wall.max(1e-9);
    let per_thread: Vec<f64> = threads
        .iter()
        .map(|t| t.bytes as f64 / 1e6 / t.secs.max(1e-9))
        .collect();
    let latencies: Vec<f64> = threads
        .iter()
        .flat_map(|t| t.latencies.iter().copied())
        .collect();
    let n = latencies.len().max(1) as f64;
    let share = |limit: f64| 100.0 * latencies.iter().filter(|&&l| l > limit).count() as f64 / n;
    let cpu_pct = 100.0 * threads.iter().map(|t| t.cpu_secs).sum::<f64>() / wall.max(1e-9);
    let mut r = empty_result("threads", duration.as_secs_f64());
    r.metrics.extend([
        ("total_mb_s".to_owned(), total_mb_s),
        (
            "latency_avg_ms".to_owned(),
            latencies.iter().sum::<f64>() / n,
        ),
        (
            "latency_max_ms".to_owned(),
            latencies.iter().copied().fold(0.0, f64::max),
        ),
        ("over_2s_pct".to_owned(), share(SLOW_MS[0])),
        ("over_10s_pct".to_owned(), share(SLOW_MS[1])),
        ("cpu_pct".to_owned(), cpu_pct),
        ("threads".to_owned(), threads.len() as f64),
    ]);
    // Was NaN, sent as `null`, when no CPU time was measured (issue 19).
    r.set_metric(
        "mb_s_per_cpu_pct",
        if cpu_pct > 0.0 {
            total_mb_s / cpu_pct
        } else {
            f64::NAN
        },
        sequential::NO_CPU_TIME,
    );
    add_latency_metrics(&mut r, "latency", &latencies, "no request was timed");
    let mut samples = latencies;
    samples.truncate(super::MAX_SERIES_SAMPLES);
    r.series.insert(
        "thread_mb_s".to_owned(),
        Series {
            unit: "MB/s".to_owned(),
            samples: per_thread,
            count: None,
        },
    );
    r.series.insert(
        "request_latency".to_owned(),
        Series {
            unit: "ms".to_owned(),
            samples,
            count: None,
        },
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_of_slow_requests_and_cpu_efficiency() {
        let t = ThreadResult {
            bytes: 4_000_000,
            secs: 2.0,
            cpu_secs: 0.5,
            latencies: vec![1.0, 2500.0, 12_000.0, 3.0],
        };
        let r = summarize(&[t], 2.0, Duration::from_secs(3));
        assert_eq!(r.metrics["total_mb_s"], 2.0);
        assert_eq!(r.metrics["over_2s_pct"], 50.0);
        assert_eq!(r.metrics["over_10s_pct"], 25.0);
        assert_eq!(r.metrics["latency_max_ms"], 12_000.0);
        assert_eq!(r.metrics["cpu_pct"], 25.0);
        assert_eq!(r.metrics["mb_s_per_cpu_pct"], 2.0 / 25.0);
        assert_eq!(r.series["thread_mb_s"].samples, vec![2.0]);
    }

    // issue 19: `"mb_s_per_cpu_pct": null` (a NaN) when the measured CPU time was 0.
    #[test]
    fn no_cpu_time_leaves_the_efficiency_out_with_a_reason() {
        let t = ThreadResult {
            bytes: 4096,
            secs: 0.001,
            cpu_secs: 0.0,
            latencies: vec![0.5],
        };
        let r = summarize(&[t], 0.001, Duration::from_millis(2));
        assert!(
            !r.metrics.contains_key("mb_s_per_cpu_pct"),
            "{:?}",
            r.metrics
        );
        assert!(r.unavailable["mb_s_per_cpu_pct"].contains("no CPU time"));
        let json = serde_json::to_value(&r).expect("serialise");
        let metrics = json["metrics"].as_object().expect("metrics");
        assert!(metrics.values().all(|v| v.is_number()), "{json}");
    }

    #[test]
    fn every_thread_writes_its_whole_file_at_random() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = Threads {
            threads: 3,
            op: IoOp::Write,
            pattern: IoPattern::Random,
            file_bytes: 1 << 20,
            block_bytes: 4096,
            direct: false,
            drop_caches: false,
        };
        let Outcome::Done(r) = run(&p, dir.path(), &AtomicBool::new(false)).expect("run") else {
            panic!("cancelled");
        };
        assert_eq!(r.series["thread_mb_s"].samples.len(), 3);
        assert_eq!(r.series["request_latency"].samples.len(), 3 * 256);
        for i in 0..3 {
            let len = std::fs::metadata(dir.path().join(format!("thread-{i}")))
                .expect("file")
                .len();
            assert_eq!(len, 1 << 20);
        }
    }
}
