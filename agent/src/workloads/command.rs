//! `command`: a user's script, run by `/bin/sh -c` in a fresh directory inside scratch, with
//! metrics taken from its stdout (JSON lines or a regex with named groups). Refused unless the
//! agent was started with `--allow-command`.

use super::{run_child, Limits, Outcome, WorkloadError};
use firstbad_wire::{CommandWorkload, MetricSource, Series, WorkloadResult};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Largest script: a bug report's test fits in far less (the request body is 64 KiB anyway).
const MAX_SCRIPT_BYTES: usize = 32 * 1024;

/// Refuses the workload unless commands are allowed; checks the regex.
pub fn validate(p: &CommandWorkload, limits: &Limits) -> Result<(), String> {
    if !limits.allow_command {
        return Err(
            "command workloads are refused: start firstbad-agent with --allow-command to run them"
                .to_owned(),
        );
    }
    if p.script.trim().is_empty() || p.script.len() > MAX_SCRIPT_BYTES {
        return Err(format!(
            "command: script must have 1..={MAX_SCRIPT_BYTES} bytes, it has {}",
            p.script.len()
        ));
    }
    if p.timeout_s == 0 {
        return Err("command: timeout_s = 0 is out of range 1..".to_owned());
    }
    if let MetricSource::Regex { pattern } = &p.metrics {
        let re =
            regex::Regex::new(pattern).map_err(|e| format!("command: metrics.pattern: {e}"))?;
        if re.capture_names().flatten().next().is_none() {
            return Err(format!(
                "command: metrics.pattern {pattern:?} has no named group such as (?P<mb_s>[0-9.]+)"
            ));
        }
    }
    Ok(())
}

/// Runs the script in `dir`; the caller removes `dir` afterwards.
pub fn run(p: &CommandWorkload, dir: &Path, cancel: &AtomicBool) -> Result<Outcome, WorkloadError> {
    let started = Instant::now();
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(&p.script)
        .current_dir(dir)
        .env("FIRSTBAD_SCRATCH", dir);
    let Some(out) = run_child(
        cmd,
        "the command",
        Duration::from_secs(p.timeout_s.into()),
        cancel,
    )?
    else {
        return Ok(Outcome::Cancelled);
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(WorkloadError::External(format!(
            "the command failed ({}): {}",
            out.status,
            stderr.trim().lines().last().unwrap_or("")
        )));
    }
    let series = extract(&p.metrics, &stdout).map_err(WorkloadError::External)?;
    if series.is_empty() {
        return Err(WorkloadError::External(
            "the command printed no metric: stdout matched neither JSON lines nor the pattern"
                .to_owned(),
        ));
    }
    Ok(Outcome::Done(summarize(series, started.elapsed())))
}

/// Every value of every metric in `stdout`, by name, in order.
pub fn extract(source: &MetricSource, stdout: &str) -> Result<BTreeMap<String, Vec<f64>>, String> {
    let mut series: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    match source {
        MetricSource::JsonLines => {
            for line in stdout.lines() {
                let Ok(serde_json::Value::Object(obj)) = serde_json::from_str(line.trim()) else {
                    continue;
                };
                for (k, v) in obj {
                    if let Some(x) = v.as_f64().filter(|x| x.is_finite()) {
                        series.entry(k).or_default().push(x);
                    }
                }
            }
        }
        MetricSource::Regex { pattern } => {
            let re = regex::Regex::new(pattern).map_err(|e| e.to_string())?;
            let names: Vec<&str> = re.capture_names().flatten().collect();
            for caps in re.captures_iter(stdout) {
                for name in &names {
                    // Rust reads "inf" and "NaN" as numbers; a metric must be a finite one.
                    if let Some(x) = caps
                        .name(name)
                        .and_then(|m| m.as_str().parse::<f64>().ok())
                        .filter(|x| x.is_finite())
                    {
                        series.entry((*name).to_owned()).or_default().push(x);
                    }
                }
            }
        }
    }
    Ok(series)
}

/// Each metric is the mean of its values (a script that prints one summary gives that value);
/// its values are kept as a series, at most [`firstbad_wire::KEPT_SAMPLES`] of them (issue 61,
/// finding 2).
fn summarize(values: BTreeMap<String, Vec<f64>>, duration: Duration) -> WorkloadResult {
    let mut r = super::empty_result("command", duration.as_secs_f64());
    for (name, samples) in values {
        // Finite values can still sum past f64::MAX.
        r.set_metric(
            &name,
            samples.iter().sum::<f64>() / samples.len().max(1) as f64,
            "the mean of its values is not a finite number (they sum past 1.8e308)",
        );
        r.series
            .insert(name, Series::bounded(String::new(), samples));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_and_regex() {
        let out = "warming up\n{\"mb_s\": 10, \"name\": \"x\"}\n{\"mb_s\": 20}\nnot json\n";
        let s = extract(&MetricSource::JsonLines, out).expect("json");
        assert_eq!(s["mb_s"], vec![10.0, 20.0]);
        assert!(!s.contains_key("name"));
        let dd = "1048576 bytes (1.0 MB, 1.0 MiB) copied, 0.002 s, 524 MB/s\n";
        let re = MetricSource::Regex {
            pattern: r"(?P<mb_s>[0-9.]+) MB/s".to_owned(),
        };
        assert_eq!(extract(&re, dd).expect("regex")["mb_s"], vec![524.0]);
    }

    // issue 19: "inf" and "NaN" parse as f64 and went out as `null`.
    #[test]
    fn values_that_are_not_finite_are_not_metrics() {
        let re = MetricSource::Regex {
            pattern: r"x=(?P<x>\S+)".to_owned(),
        };
        let s = extract(&re, "x=inf\nx=NaN\nx=2\n").expect("regex");
        assert_eq!(s["x"], vec![2.0]);
        let r = summarize(
            BTreeMap::from([("big".to_owned(), vec![f64::MAX, f64::MAX])]),
            Duration::ZERO,
        );
        assert!(!r.metrics.contains_key("big"));
        assert!(r.unavailable["big"].contains("not a finite number"));
    }

    // Issue 61, finding 2: every value a script printed went into the result, a million of
    // them into every boot of the journal.
    #[test]
    fn a_million_values_give_their_mean_and_a_bounded_series() {
        let values: Vec<f64> = (0..1_000_000).map(|i| f64::from(i % 7)).collect();
        let r = summarize(BTreeMap::from([("ms".to_owned(), values)]), Duration::ZERO);
        let mean = (0..1_000_000).map(|i| f64::from(i % 7)).sum::<f64>() / 1e6;
        assert_eq!(r.metrics["ms"], mean, "the mean of all of them");
        let s = &r.series["ms"];
        assert_eq!(
            (s.samples.len(), s.count),
            (firstbad_wire::KEPT_SAMPLES, Some(1_000_000))
        );
    }

    #[test]
    fn refused_without_allow_command() {
        let p = CommandWorkload {
            script: "true".to_owned(),
            metrics: MetricSource::JsonLines,
            timeout_s: 10,
        };
        let e = validate(&p, &Limits::default()).unwrap_err();
        assert!(e.contains("--allow-command"), "{e}");
        let allowed = Limits {
            allow_command: true,
            ..Limits::default()
        };
        validate(&p, &allowed).expect("allowed");
        let unnamed = CommandWorkload {
            metrics: MetricSource::Regex {
                pattern: "[0-9]+".to_owned(),
            },
            ..p
        };
        assert!(validate(&unnamed, &allowed)
            .unwrap_err()
            .contains("named group"));
    }
}
