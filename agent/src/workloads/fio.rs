//! `fio`: runs a job file with the host's fio (`--output-format=json`) in a fresh directory
//! inside scratch, or on a scratch device, and maps its JSON to metrics.

use super::{fio_job, run_child, Limits, Outcome, WorkloadError};
use firstbad_wire::{Fio, Series};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Largest job file: a job file is a few hundred bytes (the request body is 64 KiB anyway).
const MAX_JOB_BYTES: usize = 32 * 1024;
/// The fio percentiles mapped to metric suffixes (fio's default percentile list has them all).
const PERCENTILES: &[(&str, &str)] = &[
    ("50.000000", "p50"),
    ("90.000000", "p90"),
    ("99.000000", "p99"),
    ("99.900000", "p999"),
];

/// Refuses job files that could write outside scratch or run programs, and devices that are not
/// scratch devices; the error names the line and the option, or the device.
pub fn validate(p: &Fio, limits: &Limits) -> Result<(), String> {
    if let Some(device) = &p.device {
        limits
            .check_device(device)
            .map_err(|e| format!("fio: {e}"))?;
    }
    if p.job.len() > MAX_JOB_BYTES {
        return Err(format!(
            "fio: job is {} bytes, more than {MAX_JOB_BYTES}",
            p.job.len()
        ));
    }
    if p.timeout_s == 0 {
        return Err("fio: timeout_s = 0 is out of range 1..".to_owned());
    }
    fio_job::parse(&p.job).map_err(|e| e.to_string())?;
    Ok(())
}

/// Runs fio on the job in `dir`; the caller removes `dir` afterwards.
pub fn run(p: &Fio, dir: &Path, cancel: &AtomicBool) -> Result<Outcome, WorkloadError> {
    let started = Instant::now();
    let job = dir.join("job.fio");
    let text = job_text(p).map_err(WorkloadError::External)?;
    std::fs::write(&job, text).map_err(WorkloadError::io(&job, "write"))?;
    let mut cmd = std::process::Command::new("fio");
    cmd.arg("--output-format=json")
        .arg("job.fio")
        .current_dir(dir);
    let Some(out) = run_child(cmd, "fio", Duration::from_secs(p.timeout_s.into()), cancel)? else {
        return Ok(Outcome::Cancelled);
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(WorkloadError::External(format!(
            "fio failed ({}): {}",
            out.status,
            tail(&String::from_utf8_lossy(&out.stderr), &stdout)
        )));
    }
    let (metrics, series) = parse(&stdout).map_err(WorkloadError::External)?;
    let mut result = super::empty_result("fio", started.elapsed().as_secs_f64());
    result.series = series;
    result.metrics = metrics;
    Ok(Outcome::Done(result))
}

/// The job file fio runs, written from the parsed job (never the user's text), after a
/// `[global]` section naming the scratch device if there is one.
fn job_text(p: &Fio) -> Result<String, String> {
    let job = fio_job::parse(&p.job).map_err(|e| e.to_string())?;
    Ok(job.render(p.device.as_deref()))
}

/// The last lines of what fio said, for an error message.
fn tail(stderr: &str, stdout: &str) -> String {
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    let lines: Vec<&str> = text.trim().lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// Metrics and series by name, as parsed from fio's output.
pub type Parsed = (BTreeMap<String, f64>, BTreeMap<String, Series>);

/// Metrics and series from fio's JSON output, which may follow warnings (`fio: ...` lines).
///
/// Bandwidth and iops are summed over jobs; latency percentiles are the worst job's, since a
/// regression in one job is a regression.
pub fn parse(output: &str) -> Result<Parsed, String> {
    let start = output
        .match_indices('{')
        .map(|(i, _)| i)
        .find(|&i| i == 0 || output[..i].ends_with('\n'))
        .ok_or_else(|| format!("fio printed no JSON: {}", tail("", output)))?;
    let json: Value = serde_json::Deserializer::from_str(&output[start..])
        .into_iter::<Value>()
        .next()
        .ok_or("fio printed no JSON")?
        .map_err(|e| format!("fio's JSON does not parse: {e}"))?;
    let jobs = json["jobs"]
        .as_array()
        .filter(|j| !j.is_empty())
        .ok_or("fio's JSON has no jobs[]")?;
    let mut m = BTreeMap::new();
    let mut series = BTreeMap::new();
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    let mut worst = |m: &mut BTreeMap<String, f64>, key: String, v: f64| {
        let e = m.entry(key).or_insert(f64::NEG_INFINITY);
        *e = e.max(v);
    };
    for dir in ["read", "write"] {
        let mut per_job = Vec::new();
        for job in jobs {
            let d = &job[dir];
            let ios = num(&d["total_ios"]);
            per_job.push(num(&d["bw_bytes"]) / 1e6);
            *m.entry(format!("{dir}_mb_s")).or_insert(0.0) += num(&d["bw_bytes"]) / 1e6;
            *m.entry(format!("{dir}_iops")).or_insert(0.0) += num(&d["iops"]);
            *m.entry(format!("{dir}_bytes")).or_insert(0.0) += num(&d["io_bytes"]);
            if ios > 0.0 {
                percentiles(&d["clat_ns"], &format!("{dir}_clat"), &mut m, &mut worst);
            }
        }
        series.insert(
            format!("job_{dir}_mb_s"),
            Series {
                unit: "MB/s".to_owned(),
                samples: per_job,
                count: None,
            },
        );
    }
    for job in jobs {
        if num(&job["sync"]["total_ios"]) > 0.0 {
            percentiles(&job["sync"]["lat_ns"], "sync_lat", &mut m, &mut worst);
        }
        *m.entry("cpu_pct".to_owned()).or_insert(0.0) +=
            num(&job["usr_cpu"]) + num(&job["sys_cpu"]);
    }
    m.insert("jobs".to_owned(), jobs.len() as f64);
    Ok((m, series))
}

/// `{prefix}_p50_ms` ... `{prefix}_max_ms` and `_mean_ms` from a fio `*_ns` block.
fn percentiles(
    block: &Value,
    prefix: &str,
    m: &mut BTreeMap<String, f64>,
    worst: &mut impl FnMut(&mut BTreeMap<String, f64>, String, f64),
) {
    let ms = |v: &Value| v.as_f64().map(|ns| ns / 1e6);
    for (key, name) in PERCENTILES {
        if let Some(v) = ms(&block["percentile"][*key]) {
            worst(m, format!("{prefix}_{name}_ms"), v);
        }
    }
    if let Some(v) = ms(&block["max"]) {
        worst(m, format!("{prefix}_max_ms"), v);
    }
    if let Some(v) = ms(&block["mean"]) {
        worst(m, format!("{prefix}_mean_ms"), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(text: &str) -> Fio {
        Fio {
            job: text.to_owned(),
            device: None,
            timeout_s: 60,
        }
    }

    #[test]
    fn paths_and_programs_are_refused() {
        validate(
            &job("[w]\nrw=write\nbs=4k\nsize=4m\nfsync=1\n"),
            &Limits::default(),
        )
        .expect("plain job");
        for bad in [
            "[w]\nfilename=/dev/sda\n",
            "[w]\n Directory = /etc\n",
            "include /etc/x.fio\n",
            "[w]\nioengine=external:/tmp/x.so\n",
            "[w]\nwrite_bw_log=/etc/passwd\n",
            "[w]\nwrite_bw_log=../../x\n",
            "[w]\nsize=${SIZE}\n",
        ] {
            let e = validate(&job(bad), &Limits::default()).expect_err(bad);
            assert!(e.contains("job line"), "{e}");
        }
    }

    #[test]
    fn the_scratch_device_goes_in_a_leading_global_section() {
        let limits = Limits {
            devices: vec!["/dev/loop7".into()],
            ..Limits::default()
        };
        let on = |device: &str| Fio {
            device: Some(device.to_owned()),
            ..job("[r]\nrw=read\nbs=4k\n")
        };
        validate(&on("/dev/loop7"), &limits).expect("a scratch device");
        let e = validate(&on("/dev/sda"), &limits).unwrap_err();
        assert!(e.contains("not a scratch device"), "{e}");
        let text = job_text(&on("/dev/loop7")).expect("valid job");
        assert!(
            text.contains("[global]\nfilename=/dev/loop7\n[r]\nrw=read"),
            "{text}"
        );
        assert!(job_text(&job("[r]\n")).expect("valid").ends_with("\n[r]\n"));
    }

    #[test]
    fn json_after_warnings_is_mapped() {
        let out = r#"fio: this platform does not support process shared mutexes, forcing use of threads
note: both iodepth >= 1 and synchronous I/O engine are selected
{
  "fio version" : "fio-3.33",
  "jobs" : [
    { "jobname" : "a", "usr_cpu" : 1.5, "sys_cpu" : 2.5,
      "read" : { "io_bytes" : 0, "bw_bytes" : 0, "iops" : 0.0, "total_ios" : 0,
                 "clat_ns" : { "max" : 0, "mean" : 0.0 } },
      "write" : { "io_bytes" : 4194304, "bw_bytes" : 2000000, "iops" : 488.0, "total_ios" : 1024,
                  "clat_ns" : { "max" : 9000000, "mean" : 20000.0,
                                "percentile" : { "50.000000" : 10000, "99.000000" : 3000000 } } },
      "sync" : { "total_ios" : 1024,
                 "lat_ns" : { "max" : 90000000, "mean" : 1500000.0,
                              "percentile" : { "50.000000" : 1200000, "99.900000" : 80000000 } } } },
    { "jobname" : "b", "usr_cpu" : 0.5, "sys_cpu" : 0.5,
      "read" : { "io_bytes" : 0, "bw_bytes" : 0, "iops" : 0.0, "total_ios" : 0, "clat_ns" : {} },
      "write" : { "io_bytes" : 4194304, "bw_bytes" : 1000000, "iops" : 244.0, "total_ios" : 1024,
                  "clat_ns" : { "max" : 1000000, "mean" : 10000.0,
                                "percentile" : { "50.000000" : 20000, "99.000000" : 1000000 } } },
      "sync" : { "total_ios" : 0, "lat_ns" : {} } }
  ]
}
"#;
        let (m, s) = parse(out).expect("parse");
        assert_eq!(m["write_mb_s"], 3.0);
        assert_eq!(m["write_iops"], 732.0);
        assert_eq!(m["write_bytes"], 8388608.0);
        assert_eq!(m["read_mb_s"], 0.0);
        assert!(!m.contains_key("read_clat_p50_ms"), "{m:?}");
        // The worst job's percentiles: 0.02 ms p50 from b, 3 ms p99 from a.
        assert_eq!(m["write_clat_p50_ms"], 0.02);
        assert_eq!(m["write_clat_p99_ms"], 3.0);
        assert_eq!(m["write_clat_max_ms"], 9.0);
        assert_eq!(m["sync_lat_p50_ms"], 1.2);
        assert_eq!(m["sync_lat_p999_ms"], 80.0);
        assert_eq!(m["sync_lat_max_ms"], 90.0);
        assert_eq!(m["cpu_pct"], 5.0);
        assert_eq!(s["job_write_mb_s"].samples, vec![2.0, 1.0]);
        assert!(parse("fio: no JSON here\n")
            .unwrap_err()
            .contains("no JSON"));
    }
}
