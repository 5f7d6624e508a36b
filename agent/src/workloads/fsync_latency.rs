//! `fsync-latency`: small appends, each followed by a timed fsync, while background writers
//! stream buffered writes (the shape of kernel bug 12309).

use super::{add_latency_metrics, empty_result, sleep_unless_cancelled, Outcome, WorkloadError};
use firstbad_wire::{FsyncLatency, Series, WorkloadResult};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Largest write block: each writer holds one block in memory, and test VMs are small.
const MAX_BLOCK_BYTES: u32 = 64 << 20;
/// Most background writers: one thread each, on VMs with a few CPUs.
const MAX_WRITERS: u32 = 64;
/// Most timed fsyncs: every sample goes back in one JSON body (about 20 bytes each).
const MAX_FSYNCS: u32 = 1_000_000;
/// Longest pause between appends (one minute); longer is surely a unit mistake.
const MAX_INTERVAL_MS: u32 = 60_000;
/// Longest warm-up (ten minutes); longer is surely a unit mistake.
const MAX_WARMUP_MS: u32 = 600_000;

/// Checks the parameters; the error names the parameter, its value and the allowed range.
pub fn validate(p: &FsyncLatency) -> Result<(), String> {
    fn in_range(name: &str, value: u64, min: u64, max: u64) -> Result<(), String> {
        if (min..=max).contains(&value) {
            Ok(())
        } else {
            Err(format!(
                "fsync-latency: {name} = {value} is out of range {min}..={max}"
            ))
        }
    }
    in_range("writers", p.writers.into(), 0, MAX_WRITERS.into())?;
    if p.writers > 0 {
        in_range(
            "writer_block_bytes",
            p.writer_block_bytes.into(),
            1,
            MAX_BLOCK_BYTES.into(),
        )?;
        in_range("writer_bytes", p.writer_bytes, 1, u64::MAX)?;
        if p.writer_direct
            && !p
                .writer_block_bytes
                .is_multiple_of(super::sequential::DIRECT_UNIT)
        {
            return Err(format!(
                "fsync-latency: writer_block_bytes = {} must be a multiple of {} with \
                 writer_direct = true",
                p.writer_block_bytes,
                super::sequential::DIRECT_UNIT
            ));
        }
    }
    in_range(
        "append_bytes",
        p.append_bytes.into(),
        1,
        MAX_BLOCK_BYTES.into(),
    )?;
    in_range("fsyncs", p.fsyncs.into(), 1, MAX_FSYNCS.into())?;
    in_range(
        "interval_ms",
        p.interval_ms.into(),
        0,
        MAX_INTERVAL_MS.into(),
    )?;
    in_range("warmup_ms", p.warmup_ms.into(), 0, MAX_WARMUP_MS.into())?;
    Ok(())
}

/// Most bytes the run writes: every writer's `writer_bytes` plus every append.
pub fn bytes_needed(p: &FsyncLatency) -> u64 {
    u64::from(p.writers)
        .saturating_mul(p.writer_bytes)
        .saturating_add(u64::from(p.fsyncs).saturating_mul(p.append_bytes.into()))
}

/// Runs the workload with its files in `dir`; the caller removes `dir` afterwards.
pub fn run(p: &FsyncLatency, dir: &Path, cancel: &AtomicBool) -> Result<Outcome, WorkloadError> {
    let started = Instant::now();
    let stop = AtomicBool::new(false);
    let (foreground, writers) = std::thread::scope(|scope| {
        let stop = &stop;
        let mut handles = Vec::new();
        for i in 0..p.writers {
            let name = format!("writer-{i}");
            let path = dir.join(&name);
            let spawned = std::thread::Builder::new()
                .name(name.clone())
                .spawn_scoped(scope, move || stream(&path, p, stop, cancel));
            match spawned {
                Ok(handle) => handles.push((name, handle)),
                Err(source) => {
                    stop.store(true, Ordering::Relaxed);
                    return (Err(WorkloadError::Spawn { name, source }), Vec::new());
                }
            }
        }
        let foreground = timed_fsyncs(p, dir, cancel);
        // The writers stream until they have written writer_bytes or the foreground is done.
        stop.store(true, Ordering::Relaxed);
        let writers = handles
            .into_iter()
            .map(|(name, h)| h.join().unwrap_or(Err(WorkloadError::Panicked(name))))
            .collect::<Vec<_>>();
        (foreground, writers)
    });
    let Some(samples) = foreground? else {
        return Ok(Outcome::Cancelled);
    };
    let mut writer_bytes = 0;
    let mut writers_ended = started;
    for writer in writers {
        let (bytes, ended) = writer?;
        writer_bytes += bytes;
        writers_ended = writers_ended.max(ended);
    }
    let writer_secs = writers_ended.duration_since(started).as_secs_f64();
    let writer_mb_s = if p.writers == 0 {
        Err("writers = 0: no background writer ran")
    } else if writer_secs > 0.0 {
        Ok(writer_bytes as f64 / 1e6 / writer_secs)
    } else {
        Err("the background writers ended before the clock moved")
    };
    Ok(Outcome::Done(summarize(
        samples,
        writer_mb_s,
        started.elapsed(),
    )))
}

/// One background writer: writes of `writer_block_bytes` (buffered, or O_DIRECT with
/// `writer_direct`) to `path` until `writer_bytes` are written or `stop`/`cancel` is raised.
/// Returns the bytes written and when it ended.
fn stream(
    path: &Path,
    p: &FsyncLatency,
    stop: &AtomicBool,
    cancel: &AtomicBool,
) -> Result<(u64, Instant), WorkloadError> {
    let mut file = super::open(path, true, p.writer_direct, true)?;
    let buf = super::AlignedBuf::new(p.writer_block_bytes as usize, 0xa5);
    let total = p.writer_bytes;
    let mut written = 0u64;
    while written < total && !stop.load(Ordering::Relaxed) && !cancel.load(Ordering::Relaxed) {
        // O_DIRECT writes whole blocks only (validate() made the block a sector multiple).
        let len = if p.writer_direct {
            buf.as_slice().len()
        } else {
            (total - written).min(buf.as_slice().len() as u64) as usize
        };
        file.write_all(&buf.as_slice()[..len])
            .map_err(WorkloadError::io(path, "write"))?;
        written += len as u64;
    }
    Ok((written, Instant::now()))
}

/// The foreground loop: waits `warmup_ms`, then `fsyncs` times appends `append_bytes` and times
/// the fsync. Returns every latency in ms, or `None` when cancelled.
fn timed_fsyncs(
    p: &FsyncLatency,
    dir: &Path,
    cancel: &AtomicBool,
) -> Result<Option<Vec<f64>>, WorkloadError> {
    let path = dir.join("foreground");
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(WorkloadError::io(&path, "create"))?;
    let buf = vec![0x5au8; p.append_bytes as usize];
    if !sleep_unless_cancelled(Duration::from_millis(p.warmup_ms.into()), cancel) {
        return Ok(None);
    }
    let interval = Duration::from_millis(p.interval_ms.into());
    let mut samples = Vec::with_capacity(p.fsyncs as usize);
    for i in 0..p.fsyncs {
        if cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        file.write_all(&buf)
            .map_err(WorkloadError::io(&path, "append"))?;
        let t = Instant::now();
        file.sync_all().map_err(WorkloadError::io(&path, "fsync"))?;
        samples.push(t.elapsed().as_secs_f64() * 1e3);
        let last = i + 1 == p.fsyncs;
        if !last && !interval.is_zero() && !sleep_unless_cancelled(interval, cancel) {
            return Ok(None);
        }
    }
    Ok(Some(samples))
}

/// The result: every fsync latency plus its percentiles, and the writers' throughput (or why
/// there is none).
fn summarize(
    samples: Vec<f64>,
    writer_mb_s: Result<f64, &str>,
    duration: Duration,
) -> WorkloadResult {
    let mut r = empty_result("fsync-latency", duration.as_secs_f64());
    add_latency_metrics(&mut r, "fsync_latency", &samples, "no fsync was timed");
    match writer_mb_s {
        Ok(v) => r.set_metric("writer_mb_s", v, "not a finite rate"),
        Err(why) => r.set_metric("writer_mb_s", f64::NAN, why),
    }
    r.metrics.insert("fsyncs".to_owned(), samples.len() as f64);
    r.series.insert(
        "fsync_latency".to_owned(),
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

    fn params() -> FsyncLatency {
        FsyncLatency {
            writers: 1,
            writer_bytes: 1 << 20,
            writer_block_bytes: 65536,
            append_bytes: 4096,
            fsyncs: 5,
            interval_ms: 0,
            warmup_ms: 0,
            writer_direct: false,
        }
    }

    #[test]
    fn validation_names_the_parameter_and_range() {
        let err = validate(&FsyncLatency {
            fsyncs: 0,
            ..params()
        })
        .unwrap_err();
        assert_eq!(err, "fsync-latency: fsyncs = 0 is out of range 1..=1000000");
        let err = validate(&FsyncLatency {
            writer_block_bytes: (64 << 20) + 1,
            ..params()
        })
        .unwrap_err();
        assert!(err.contains("writer_block_bytes"), "{err}");
        // No writers: their block size does not matter.
        validate(&FsyncLatency {
            writers: 0,
            writer_block_bytes: 0,
            writer_bytes: 0,
            ..params()
        })
        .expect("valid");
    }

    #[test]
    fn bytes_needed_counts_writers_and_appends_without_overflow() {
        assert_eq!(bytes_needed(&params()), (1 << 20) + 5 * 4096);
        let huge = FsyncLatency {
            writers: 64,
            writer_bytes: u64::MAX,
            ..params()
        };
        assert_eq!(bytes_needed(&huge), u64::MAX);
    }

    #[test]
    fn summary_has_ordered_percentiles_and_every_sample() {
        let samples = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        let r = summarize(samples.clone(), Ok(12.5), Duration::from_secs(2));
        assert_eq!(r.series["fsync_latency"].samples, samples);
        assert_eq!(r.metrics["fsync_latency_p50_ms"], 3.0);
        assert_eq!(r.metrics["fsync_latency_max_ms"], 5.0);
        assert_eq!(r.metrics["fsync_latency_mean_ms"], 3.0);
        assert_eq!(r.metrics["fsyncs"], 5.0);
        assert_eq!(r.metrics["writer_mb_s"], 12.5);
        assert_eq!(r.duration_s, 2.0);
        assert!(r.unavailable.is_empty(), "{:?}", r.unavailable);
    }

    // issue 19: a metric that cannot be computed is left out, with the reason.
    #[test]
    fn without_writers_the_writer_rate_is_unavailable_not_zero() {
        let r = summarize(
            vec![1.0],
            Err("writers = 0: no background writer ran"),
            Duration::ZERO,
        );
        assert!(!r.metrics.contains_key("writer_mb_s"), "{:?}", r.metrics);
        assert!(r.unavailable["writer_mb_s"].contains("writers = 0"));
    }

    #[test]
    fn a_small_run_times_every_fsync() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cancel = AtomicBool::new(false);
        let Outcome::Done(r) = run(&params(), dir.path(), &cancel).expect("run") else {
            panic!("not cancelled, yet no result");
        };
        let samples = &r.series["fsync_latency"].samples;
        assert_eq!(samples.len(), 5);
        assert!(samples.iter().all(|&ms| ms > 0.0), "{samples:?}");
        assert!(r.metrics["writer_mb_s"] > 0.0);
    }

    #[test]
    fn a_cancelled_run_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cancel = AtomicBool::new(true);
        let outcome = run(&params(), dir.path(), &cancel).expect("run");
        assert!(matches!(outcome, Outcome::Cancelled), "{outcome:?}");
    }
}
