//! `sequential`: block after block, read or write, of a file or a scratch block device, with any
//! block size (the md RAID0 read regression hit sizes that are not page multiples).

use super::{
    drop_caches, latency_metrics, open, AlignedBuf, Limits, Outcome, WorkloadError,
    MAX_SERIES_SAMPLES,
};
use firstbad_wire::{IoOp, Sequential, Series, WorkloadResult};
use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Largest block: one buffer in memory, and test VMs are small.
pub const MAX_BLOCK_BYTES: u32 = 64 << 20;
/// O_DIRECT transfers must be multiples of the logical block size; 512 is the smallest one.
pub const DIRECT_UNIT: u32 = 512;
/// Size of the writes that lay out a file before it is read: large, to be quick.
const PREPARE_BLOCK: usize = 1 << 20;

/// Checks the parameters; the error names the parameter, its value and the allowed range.
pub fn validate(p: &Sequential, limits: &Limits) -> Result<(), String> {
    if !(1..=MAX_BLOCK_BYTES).contains(&p.block_bytes) {
        return Err(format!(
            "sequential: block_bytes = {} is out of range 1..={MAX_BLOCK_BYTES}",
            p.block_bytes
        ));
    }
    if p.direct && !p.block_bytes.is_multiple_of(DIRECT_UNIT) {
        return Err(format!(
            "sequential: block_bytes = {} must be a multiple of {DIRECT_UNIT} with direct = true",
            p.block_bytes
        ));
    }
    if p.bytes < u64::from(p.block_bytes) {
        return Err(format!(
            "sequential: bytes = {} is less than one block ({})",
            p.bytes, p.block_bytes
        ));
    }
    if let Some(device) = &p.device {
        limits
            .check_device(device)
            .map_err(|e| format!("sequential: {e}"))?;
    }
    Ok(())
}

/// Bytes written to the scratch directory: the file, unless the target is a device.
pub fn bytes_needed(p: &Sequential) -> u64 {
    if p.device.is_some() {
        0
    } else {
        p.bytes
    }
}

/// Runs the workload; its file (if any) lives in `dir`, which the caller removes.
pub fn run(p: &Sequential, dir: &Path, cancel: &AtomicBool) -> Result<Outcome, WorkloadError> {
    let started = Instant::now();
    let block = p.block_bytes as usize;
    let requests = p.bytes / u64::from(p.block_bytes);
    let write = p.op == IoOp::Write;
    let path = match &p.device {
        Some(d) => PathBuf::from(d),
        None => dir.join("data"),
    };
    if let Some(device) = &p.device {
        let mut f = open(&path, false, false, false)?;
        let size = f
            .seek(SeekFrom::End(0))
            .map_err(WorkloadError::io(&path, "seek to end"))?;
        if size < requests * u64::from(p.block_bytes) {
            return Err(WorkloadError::External(format!(
                "sequential: device {device} has {size} bytes, fewer than bytes = {}",
                p.bytes
            )));
        }
    } else if !write && !prepare(&path, requests * u64::from(p.block_bytes), cancel)? {
        return Ok(Outcome::Cancelled);
    }
    if !write && p.drop_caches {
        let f = open(&path, false, false, false)?;
        drop_caches(&f, &path)?;
    }
    let file = open(&path, write, p.direct, write && p.device.is_none())?;
    let mut buf = AlignedBuf::new(block, 0xa5);
    let limit = (p.duration_ms > 0).then(|| Duration::from_millis(p.duration_ms.into()));
    let mut latencies = Vec::with_capacity(requests.min(MAX_SERIES_SAMPLES as u64) as usize);
    let mut all = Vec::new();
    let mut done = 0u64;
    let t0 = Instant::now();
    while done < requests {
        if cancel.load(Ordering::Relaxed) {
            return Ok(Outcome::Cancelled);
        }
        if limit.is_some_and(|l| t0.elapsed() >= l) {
            break;
        }
        let offset = done * u64::from(p.block_bytes);
        let t = Instant::now();
        if write {
            file.write_all_at(buf.as_slice(), offset)
                .map_err(WorkloadError::io(&path, "write"))?;
        } else {
            file.read_exact_at(buf.as_mut_slice(), offset)
                .map_err(WorkloadError::io(&path, "read"))?;
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if latencies.len() < MAX_SERIES_SAMPLES {
            latencies.push(ms);
        } else {
            all.push(ms);
        }
        done += 1;
    }
    if write {
        // Buffered writes count once they reach the device, as dd conv=fsync counts them.
        file.sync_data()
            .map_err(WorkloadError::io(&path, "fdatasync"))?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let bytes = done * u64::from(p.block_bytes);
    all.extend_from_slice(&latencies);
    let mut metrics = latency_metrics("request_latency", &all);
    metrics.insert("mb_s".to_owned(), bytes as f64 / 1e6 / secs.max(1e-9));
    metrics.insert("bytes".to_owned(), bytes as f64);
    metrics.insert("requests".to_owned(), done as f64);
    let series = BTreeMap::from([(
        "request_latency".to_owned(),
        Series {
            unit: "ms".to_owned(),
            samples: latencies,
        },
    )]);
    Ok(Outcome::Done(WorkloadResult {
        kind: "sequential".to_owned(),
        series,
        metrics,
        duration_s: started.elapsed().as_secs_f64(),
        system: None,
        vmstat: Vec::new(),
    }))
}

/// Lays out `bytes` of data in a new file at `path` and writes it back; `false` if cancelled.
pub fn prepare(path: &Path, bytes: u64, cancel: &AtomicBool) -> Result<bool, WorkloadError> {
    let file = open(path, true, false, true)?;
    let buf = vec![0x5au8; PREPARE_BLOCK];
    let mut off = 0u64;
    while off < bytes {
        if cancel.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let len = (bytes - off).min(PREPARE_BLOCK as u64) as usize;
        file.write_all_at(&buf[..len], off)
            .map_err(WorkloadError::io(path, "write"))?;
        off += len as u64;
    }
    file.sync_all().map_err(WorkloadError::io(path, "fsync"))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Sequential {
        Sequential {
            op: IoOp::Read,
            device: None,
            block_bytes: 6144,
            bytes: 6144 * 100,
            duration_ms: 0,
            direct: true,
            drop_caches: false,
        }
    }

    #[test]
    fn validation_names_the_parameter() {
        let l = Limits::default();
        validate(&params(), &l).expect("6144 is 12 sectors: fine for O_DIRECT");
        let e = validate(
            &Sequential {
                block_bytes: 6000,
                ..params()
            },
            &l,
        )
        .unwrap_err();
        assert!(e.contains("multiple of 512"), "{e}");
        let e = validate(
            &Sequential {
                device: Some("/dev/sda".into()),
                ..params()
            },
            &l,
        )
        .unwrap_err();
        assert!(e.contains("not a scratch device"), "{e}");
    }

    #[test]
    fn a_direct_read_with_a_non_page_block_reads_every_block() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Outcome::Done(r) = run(&params(), dir.path(), &AtomicBool::new(false)).expect("run")
        else {
            panic!("cancelled");
        };
        assert_eq!(r.metrics["requests"], 100.0);
        assert_eq!(r.metrics["bytes"], 614400.0);
        assert_eq!(r.series["request_latency"].samples.len(), 100);
        assert!(r.metrics["mb_s"] > 0.0);
    }
}
