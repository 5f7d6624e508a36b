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

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of this protocol; the orchestrator refuses an agent that speaks another.
pub const PROTOCOL_VERSION: u32 = 1;

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
}

impl Workload {
    /// The workload's kind as written in TOML (`fsync-latency`).
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::FsyncLatency(_) => "fsync-latency",
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
}

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
    /// Scalar metrics by name, e.g. `fsync_latency_p99_ms`, `writer_mb_s`.
    pub metrics: BTreeMap<String, f64>,
    /// Wall-clock duration of the run in seconds.
    pub duration_s: f64,
}

/// A series of raw samples with their unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Unit of every sample (`ms`, `MB/s`).
    pub unit: String,
    /// The samples, in the order they were taken.
    pub samples: Vec<f64>,
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
