//! Wire types between the firstbad orchestrator and `firstbad-agent`.
//!
//! One definition, used by both sides, so that the two cannot drift apart. The agent serves
//! these as JSON over HTTP; every request carries `Authorization: Bearer <token>`.
//!
//! | method | path                     | body            | answer                         |
//! |--------|--------------------------|-----------------|--------------------------------|
//! | GET    | `/v1/identity`           | -               | [`Identity`]                   |
//! | POST   | `/v1/runs`               | [`RunRequest`]  | 202 [`RunStarted`], 409 busy   |
//! | GET    | `/v1/runs/{id}`          | -               | [`RunStatus`]                  |
//! | POST   | `/v1/runs/{id}/cancel`   | -               | [`RunStatus`]                  |
//!
//! Errors are [`ApiError`] bodies with a 4xx/5xx status.

pub mod oneshot;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of this protocol; the orchestrator refuses an agent that speaks another.
///
/// 2: [`WorkloadResult::unavailable`]; a metric is finite or absent, never `null` (issue 19).
pub const PROTOCOL_VERSION: u32 = 2;

/// The TCP port the agent listens on inside a qemu guest.
pub const GUEST_AGENT_PORT: u16 = 8080;

/// What the agent says about the machine it runs on; checked before any sample counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Protocol version the agent speaks ([`PROTOCOL_VERSION`]).
    pub protocol: u32,
    /// Version of the agent binary.
    pub agent_version: String,
    /// `uname -r` of the running kernel.
    pub kernel_release: String,
    /// `/proc/sys/kernel/random/boot_id`: changes on every boot.
    pub boot_id: String,
    /// `uname -n`.
    pub hostname: String,
}

/// A request to run one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// The workload and its parameters.
    pub workload: Workload,
}

/// A workload the agent knows how to run, tagged by `kind` as in `workloads/*.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Workload {
    /// Small appends, each followed by a timed fsync, under background streaming writers
    /// (the shape of kernel bug 12309).
    FsyncLatency(FsyncLatency),
    /// Sequential reads or writes of a file or scratch block device, with any block size
    /// (the md RAID0 read regression, which hit block sizes that are not page multiples).
    Sequential(Sequential),
    /// tiobench: 1 to 256 threads each reading or writing its own file.
    Threads(Threads),
    /// A fio job file, run by the test host's fio with `--output-format=json`.
    Fio(Fio),
    /// A user's script; metrics come from its output. Refused unless the agent was started with
    /// `--allow-command`.
    Command(CommandWorkload),
}

impl Workload {
    /// The workload's kind as written in TOML (`fsync-latency`).
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::FsyncLatency(_) => "fsync-latency",
            Workload::Sequential(_) => "sequential",
            Workload::Threads(_) => "threads",
            Workload::Fio(_) => "fio",
            Workload::Command(_) => "command",
        }
    }
}

/// Parameters of the `fsync-latency` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsyncLatency {
    /// Number of background streaming writers (0 for none).
    pub writers: u32,
    /// Bytes each background writer writes in total before it stops (it also stops when the
    /// foreground loop ends).
    pub writer_bytes: u64,
    /// Size of each background write in bytes.
    pub writer_block_bytes: u32,
    /// Bytes appended before each fsync by the foreground writer.
    pub append_bytes: u32,
    /// Number of timed fsyncs.
    pub fsyncs: u32,
    /// Pause between two appends, in milliseconds.
    pub interval_ms: u32,
    /// Milliseconds the background writers run before the first timed fsync, so that dirty
    /// pages have built up.
    #[serde(default)]
    pub warmup_ms: u32,
    /// Background writers use O_DIRECT instead of buffered writes (their block size must then
    /// be a multiple of the device's logical block size).
    #[serde(default)]
    pub writer_direct: bool,
}

/// Whether a workload reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoOp {
    /// Reads (the data is written first when the target is a file the agent creates).
    Read,
    /// Writes.
    Write,
}

/// In which order a thread visits the blocks of its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoPattern {
    /// Block after block, from the start.
    #[default]
    Sequential,
    /// Blocks at uniformly random block-aligned offsets, as many requests as blocks.
    Random,
}

/// Parameters of the `sequential` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sequential {
    /// Read or write.
    pub op: IoOp,
    /// A block device to use instead of a file in scratch; it must be one of the agent's
    /// `--scratch-device`s (its contents are destroyed by writes).
    #[serde(default)]
    pub device: Option<String>,
    /// Several scratch block devices at once, one reader or writer thread per device, instead
    /// of `device` (the "several disks in parallel" reports); each transfers `bytes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// Bytes per read(2)/write(2); any size, e.g. 6144 (1.5 pages).
    pub block_bytes: u32,
    /// Bytes to transfer (and the file's size when the target is a file).
    pub bytes: u64,
    /// Stop after this many milliseconds even if `bytes` are not done (0: no limit).
    #[serde(default)]
    pub duration_ms: u32,
    /// Open with O_DIRECT (the page cache is bypassed).
    #[serde(default)]
    pub direct: bool,
    /// Before reads: write back and drop the target's cached pages (fdatasync + fadvise
    /// DONTNEED), then, as root, drop the page cache (`vm.drop_caches = 3`).
    #[serde(default = "yes")]
    pub drop_caches: bool,
}

/// Parameters of the `threads` workload (tiobench).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Threads {
    /// Number of threads, each with its own file (1..=256).
    pub threads: u32,
    /// Read or write.
    pub op: IoOp,
    /// Sequential or random block order.
    #[serde(default)]
    pub pattern: IoPattern,
    /// Size of each thread's file in bytes (each thread transfers this much).
    pub file_bytes: u64,
    /// Bytes per request.
    pub block_bytes: u32,
    /// Open with O_DIRECT.
    #[serde(default)]
    pub direct: bool,
    /// Before reads: drop the files' cached pages and, as root, the page cache.
    #[serde(default = "yes")]
    pub drop_caches: bool,
}

/// Parameters of the `fio` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fio {
    /// The job file's text. The agent parses it as fio does, refuses options and engines
    /// outside its allowlist (`docs/agent-fio.md`; none names a path or a program) and runs
    /// the parsed form, never this text, in a fresh directory inside scratch.
    pub job: String,
    /// A scratch block device (one of the agent's `--scratch-device`s) that every job of the
    /// file uses: the agent puts `filename=<device>` in a `[global]` section ahead of the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Kill fio after this many seconds (it then counts as failed).
    #[serde(default = "fio_timeout")]
    pub timeout_s: u32,
}

/// Where a `command` workload's metrics come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "kebab-case", deny_unknown_fields)]
pub enum MetricSource {
    /// Every stdout line that is a JSON object adds its numeric fields as samples.
    JsonLines,
    /// Every match of this regex in stdout adds a sample per named group, e.g.
    /// `(?P<mb_s>[0-9.]+) MB/s`.
    Regex {
        /// The pattern (Rust `regex` syntax); each named group is a metric.
        pattern: String,
    },
}

/// Parameters of the `command` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandWorkload {
    /// Script run by `/bin/sh -c` in a fresh directory inside scratch (also in
    /// `$FIRSTBAD_SCRATCH`).
    pub script: String,
    /// How to read metrics from its stdout.
    pub metrics: MetricSource,
    /// Kill the script after this many seconds (it then counts as failed).
    #[serde(default = "fio_timeout")]
    pub timeout_s: u32,
}

fn yes() -> bool {
    true
}

/// Default time limit of `fio` and `command` runs: ten minutes.
fn fio_timeout() -> u32 {
    600
}

/// The state of the test host that explains a difference: taken at the start of every run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemSnapshot {
    /// `uname -r`.
    pub kernel_release: String,
    /// `/proc/cmdline`.
    pub cmdline: String,
    /// `vm.dirty_*` sysctls by name (`vm.dirty_ratio` ...), as the kernel prints them.
    pub sysctls: BTreeMap<String, String>,
    /// The block device under the scratch directory (and the scratch devices), with its queue.
    pub devices: Vec<BlockQueue>,
    /// The mount holding the scratch directory.
    pub mount: Option<MountInfo>,
    /// `MemTotal` in KiB.
    pub mem_total_kb: u64,
    /// `MemAvailable` in KiB.
    pub mem_available_kb: u64,
    /// Online CPUs.
    pub cpus: u32,
    /// First `model name` of /proc/cpuinfo.
    pub cpu_model: String,
}

/// A block device's queue settings from `/sys/block/<dev>/queue` (and `device/queue_depth`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockQueue {
    /// Kernel name, e.g. `vda` or `loop3` (the whole disk when scratch is on a partition).
    pub name: String,
    /// `queue/scheduler`, e.g. `[mq-deadline] none`.
    pub scheduler: Option<String>,
    /// `queue/nr_requests`.
    pub nr_requests: Option<u64>,
    /// `device/queue_depth` (SCSI/SATA only).
    pub queue_depth: Option<u64>,
    /// `queue/read_ahead_kb`.
    pub read_ahead_kb: Option<u64>,
}

/// One line of `/proc/self/mounts`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MountInfo {
    /// The mounted device (`/dev/vda1`).
    pub source: String,
    /// Where it is mounted.
    pub mount_point: String,
    /// File system type (`ext4`).
    pub fstype: String,
    /// Mount options (`rw,relatime,nodelalloc`).
    pub options: String,
}

/// One second of `vmstat 1`: rates over the second before `t_s`, counts at `t_s`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VmstatSample {
    /// Seconds since the run started.
    pub t_s: f64,
    /// KiB/s read from block devices (`pgpgin`).
    pub bi: f64,
    /// KiB/s written to block devices (`pgpgout`).
    pub bo: f64,
    /// Percent of CPU time in user mode (incl. nice).
    pub us: f64,
    /// Percent in the kernel (system, irq, softirq).
    pub sy: f64,
    /// Percent idle.
    pub id: f64,
    /// Percent waiting for I/O.
    pub wa: f64,
    /// Dirty pages (`nr_dirty`).
    pub nr_dirty: u64,
    /// Pages under writeback (`nr_writeback`).
    pub nr_writeback: u64,
}

/// Metric keys the `sequential` workload reports (each is in `metrics` or, with its reason, in
/// `unavailable`).
pub const SEQUENTIAL_METRICS: &[&str] = &[
    "mb_s",
    "request_latency_p50_ms",
    "request_latency_p99_ms",
    "request_latency_p999_ms",
    "request_latency_max_ms",
    "request_latency_mean_ms",
    "cpu_pct",
    "cpu_us_pct",
    "cpu_sy_pct",
    "mb_s_per_cpu_pct",
];

/// Metric keys the `threads` workload reports (besides per-thread series; each is in `metrics`
/// or, with its reason, in `unavailable`).
pub const THREADS_METRICS: &[&str] = &[
    "total_mb_s",
    "latency_avg_ms",
    "latency_max_ms",
    "over_2s_pct",
    "over_10s_pct",
    "cpu_pct",
    "mb_s_per_cpu_pct",
];

/// Answer to a started run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStarted {
    /// Identifier to poll with `GET /v1/runs/{id}`.
    pub id: String,
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    /// Still running.
    Running,
    /// Finished; `result` is set.
    Done,
    /// Failed; `error` says why.
    Failed,
    /// Cancelled on request.
    Cancelled,
}

/// The state of one run, and its result once done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    /// The run's identifier.
    pub id: String,
    /// Where the run is.
    pub state: RunState,
    /// The result, when `state` is `done`.
    pub result: Option<WorkloadResult>,
    /// What went wrong, when `state` is `failed`.
    pub error: Option<String>,
}

/// Everything one run measured: every sample, plus summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// The workload's kind (`fsync-latency`).
    pub kind: String,
    /// Raw samples by series name, e.g. `fsync_latency` (every fsync, in `unit`).
    pub series: BTreeMap<String, Series>,
    /// Scalar metrics by name, e.g. `fsync_latency_p99_ms`, `writer_mb_s`. Every value is
    /// finite: a metric that could not be computed is in `unavailable` instead.
    pub metrics: BTreeMap<String, f64>,
    /// Metrics this run could not compute, by name, with the reason (e.g.
    /// `mb_s_per_cpu_pct`: no CPU time was measured). A name is in `metrics` or here, not both.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
    /// Wall-clock duration of the run in seconds.
    pub duration_s: f64,
    /// The test host's state when the run started.
    #[serde(default)]
    pub system: Option<SystemSnapshot>,
    /// A vmstat-style sample each second of the run.
    #[serde(default)]
    pub vmstat: Vec<VmstatSample>,
}

impl WorkloadResult {
    /// A result of `kind` with nothing in it yet: for a workload's summary to fill, and for
    /// results that stand for a run (the simulator's, tests').
    pub fn empty(kind: &str, duration_s: f64) -> WorkloadResult {
        WorkloadResult {
            kind: kind.to_owned(),
            series: BTreeMap::new(),
            metrics: BTreeMap::new(),
            unavailable: BTreeMap::new(),
            duration_s,
            system: None,
            vmstat: Vec::new(),
        }
    }

    /// Records `value` as metric `name` if it is finite, and as unavailable with `reason`
    /// otherwise (NaN and infinities serialise as `null`, which no reader can use).
    pub fn set_metric(&mut self, name: &str, value: f64, reason: &str) {
        if value.is_finite() {
            self.unavailable.remove(name);
            self.metrics.insert(name.to_owned(), value);
        } else {
            self.metrics.remove(name);
            self.unavailable.insert(name.to_owned(), reason.to_owned());
        }
    }

    /// Moves every metric that is not finite to `unavailable` and drops samples that are not
    /// finite, so that the result holds numbers only; returns how many it changed.
    pub fn keep_finite(&mut self) -> usize {
        let bad: Vec<String> = self
            .metrics
            .iter()
            .filter(|(_, v)| !v.is_finite())
            .map(|(k, _)| k.clone())
            .collect();
        let mut changed = bad.len();
        for name in bad {
            let value = self.metrics.remove(&name).unwrap_or(f64::NAN);
            self.unavailable
                .entry(name)
                .or_insert_with(|| format!("computed as {value}, which is not a finite number"));
        }
        for series in self.series.values_mut() {
            let before = series.samples.len();
            series.samples.retain(|v| v.is_finite());
            changed += before - series.samples.len();
        }
        changed
    }
}

/// A series of raw samples with their unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Unit of every sample (`ms`, `MB/s`).
    pub unit: String,
    /// The samples, in the order they were taken.
    pub samples: Vec<f64>,
    /// How many samples the run gave, when `samples` keeps only some of them (a metric
    /// command hunt keeps at most a few thousand of a run, evenly spaced); `None`: all kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// The most samples a [`Series`] made by [`Series::bounded`] keeps: a command printing
/// 1,000,000 values a run took `firstbad run` to 989 MB and its journal to 104 MB in 18 runs
/// (issue 61, finding 2). More than any tool's repetitions (hyperfine's and criterion's are
/// tens to hundreds, fsync-latency's a few hundred), about 30 KB of JSON.
pub const KEPT_SAMPLES: usize = 4096;

impl Series {
    /// A series of at most [`KEPT_SAMPLES`] of `samples`, evenly spaced in the order they
    /// were taken (the same ones every time), with how many there were when some were left
    /// out. A statistic of all of them is computed before, by the caller.
    pub fn bounded(unit: String, samples: Vec<f64>) -> Series {
        let n = samples.len();
        if n <= KEPT_SAMPLES {
            return Series {
                unit,
                samples,
                count: None,
            };
        }
        Series {
            unit,
            samples: (0..KEPT_SAMPLES)
                .map(|i| samples[i * n / KEPT_SAMPLES])
                .collect(),
            count: Some(n as u64),
        }
    }
}

/// An error answer from the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// What went wrong, for a person.
    pub error: String,
}

/// Percentile `p` (0..=100) of `sorted` by linear interpolation between closest ranks
/// (numpy's default, R's type 7). `None` for an empty slice.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0).clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_is_tagged_by_kind_like_the_toml_files() {
        let w = Workload::FsyncLatency(FsyncLatency {
            writers: 1,
            writer_bytes: 1 << 20,
            writer_block_bytes: 65536,
            append_bytes: 4096,
            fsyncs: 10,
            interval_ms: 0,
            warmup_ms: 0,
            writer_direct: false,
        });
        let json = serde_json::to_value(&w).unwrap();
        assert_eq!(json["kind"], "fsync-latency");
        let back: Workload = serde_json::from_value(json).unwrap();
        assert_eq!(back, w);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_str::<Workload>(
            r#"{"kind":"fsync-latency","writers":1,"writer_bytes":1,"writer_block_bytes":1,
                "append_bytes":1,"fsyncs":1,"interval_ms":0,"fsync_count":3}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("fsync_count"), "{err}");
    }

    // issue 19: a NaN metric went out as `"mb_s_per_cpu_pct": null`.
    #[test]
    fn metrics_are_finite_or_unavailable_with_a_reason() {
        let mut r = WorkloadResult {
            kind: "threads".into(),
            series: BTreeMap::from([(
                "x".to_owned(),
                Series {
                    unit: "ms".into(),
                    samples: vec![1.0, f64::NAN, 2.0, f64::INFINITY],
                    count: None,
                },
            )]),
            metrics: BTreeMap::from([("a".to_owned(), 1.0), ("b".to_owned(), f64::NAN)]),
            unavailable: BTreeMap::new(),
            duration_s: 1.0,
            system: None,
            vmstat: Vec::new(),
        };
        r.set_metric("c", f64::INFINITY, "no CPU time was measured");
        assert_eq!(r.keep_finite(), 3);
        let json = serde_json::to_string(&r).unwrap();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        let metrics = value["metrics"].as_object().unwrap();
        assert!(metrics.values().all(|v| v.is_number()), "{json}");
        let back: WorkloadResult = serde_json::from_str(&json).unwrap();
        assert_eq!(back.metrics.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(back.unavailable["c"], "no CPU time was measured");
        assert!(
            back.unavailable["b"].contains("NaN"),
            "{:?}",
            back.unavailable
        );
        assert_eq!(back.series["x"].samples, vec![1.0, 2.0]);
        // A result from an agent that never sends the field still parses.
        let old = r#"{"kind":"k","series":{},"metrics":{},"duration_s":1.0}"#;
        assert!(serde_json::from_str::<WorkloadResult>(old)
            .unwrap()
            .unavailable
            .is_empty());
    }

    #[test]
    fn percentile_matches_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4, 10], [50, 90, 99]) -> [3.0, 7.6, 9.76]
        let v = [1.0, 2.0, 3.0, 4.0, 10.0];
        assert_eq!(percentile(&v, 50.0), Some(3.0));
        assert!((percentile(&v, 90.0).unwrap() - 7.6).abs() < 1e-9);
        assert!((percentile(&v, 99.0).unwrap() - 9.76).abs() < 1e-9);
        assert_eq!(percentile(&[], 50.0), None);
    }
}
