//! The LAVA farm test host (`kind = "lava"`): each boot is one LAVA job.
//!
//! For a boot firstbad assembles the guest as the qemu host does (busybox, [`super::qemu::INIT`],
//! the static agent, a fresh token, the kernel's modules) and adds the workload: the agent runs
//! it once at boot in its one-shot mode and prints the result on the console
//! ([`firstbad_wire::oneshot`]), which LAVA keeps in the job's log. firstbad never needs to
//! reach the device: it submits the job through the REST API, follows the job and its log, and
//! reads the result from the log. So a result survives a firstbad restart: a resumed hunt
//! re-attaches to the job (its [`JobMark`], the boot's checkpoint) and reads what the job
//! printed meanwhile.
//!
//! What LAVA says is mapped so that no verdict ever comes from the farm's trouble (facts in
//! docs/lava.md): an Incomplete or Canceled job, an infrastructure error, a device lost
//! mid-job and a job past `job_timeout_s` are failed boots; a server that does not answer is
//! waited for, with backoff, up to `server_deadline_s`, and then a host error naming it.

use super::{ConsoleScanner, HostError};
use crate::config::{LavaConfig, LavaToken, WorkloadConfig};
use crate::exec::checkpoint::{Checkpoint, CheckpointLink};
use crate::exec::{BootJob, Task, TestHost};
use crate::hosts::cpio::Archive;
use crate::journal::BootOutcome;
use firstbad_wire::oneshot::Decoder;
use firstbad_wire::Workload;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

mod api;
mod job;
mod log;
mod token;

use log::{clip, parse_log, LogLine, Say, Seen};
use token::read_token_file;

/// How often a running job and its log are read.
const POLL: Duration = Duration::from_secs(2);
/// Bound on one REST call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest wait between two tries of a server that does not answer.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long a job that printed its result may take to end (the guest powers off at once).
const END_GRACE: Duration = Duration::from_secs(120);

/// What a farm boot's checkpoints hold ([`crate::exec::checkpoint`]): firstbad's token, written
/// into the job's definition, journalled before the job is submitted, and the farm's id of the
/// job once it gave one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobMark {
    /// firstbad's token in the job's definition.
    pub token: String,
    /// The farm's id, once it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

impl JobMark {
    /// The mark a checkpoint of this host holds; `None` for another host's or one that is not
    /// a mark.
    fn of(c: &Checkpoint, host: &str) -> Option<JobMark> {
        (c.host == host)
            .then(|| serde_json::from_value(c.data.clone()).ok())
            .flatten()
    }

    /// Journals the mark as the boot's checkpoint, and waits until it is on disk.
    async fn write(
        &self,
        link: &CheckpointLink,
        b: &FarmBoot<'_>,
        host: &str,
    ) -> Result<(), HostError> {
        let data = serde_json::to_value(self).expect("a job mark serialises");
        link.write(b.commit, b.boot, host, data).await
    }
}

/// One boot for the farm.
pub struct FarmBoot<'a> {
    /// The commit.
    pub commit: &'a str,
    /// Its boot number.
    pub boot: u32,
    /// The kernel.
    pub image: &'a Path,
    /// The release the booted kernel must report.
    pub release: &'a str,
    /// Where the job's console goes.
    pub console: &'a Path,
    /// The workload the agent runs once.
    pub workload: &'a Workload,
    /// The metric the hunt reads.
    pub metric: &'a str,
    /// The workload's own timeout.
    pub workload_timeout_s: u64,
    /// The journal's side.
    pub link: &'a CheckpointLink,
}

/// A LAVA farm as the executor's test host: one host of `jobs` boots at once in the pool, each
/// boot a job whose token and id are the boot's checkpoints.
pub struct Farm {
    lava: std::sync::Arc<LavaHost>,
    workload: WorkloadConfig,
    /// [`super::machine::test_delay`].
    delay: Duration,
}

impl Farm {
    /// The farm `lava` running `workload`.
    pub fn new(lava: std::sync::Arc<LavaHost>, workload: &WorkloadConfig) -> Farm {
        Farm {
            delay: super::machine::test_delay(lava.name()),
            lava,
            workload: workload.clone(),
        }
    }
}

impl TestHost for Farm {
    fn name(&self) -> &str {
        self.lava.name()
    }

    fn capacity(&self) -> usize {
        self.lava.jobs()
    }

    fn boot(self: std::sync::Arc<Self>, job: BootJob) -> Task<Result<BootOutcome, HostError>> {
        Box::pin(async move {
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            // A farm runs several boots at once: no lock.
            crate::exec::kernel::status("submitting");
            self.lava
                .boot(FarmBoot {
                    commit: &job.commit,
                    boot: job.boot,
                    image: &job.image,
                    release: &job.release,
                    console: &job.console,
                    workload: &self.workload.workload,
                    metric: &self.workload.metric,
                    workload_timeout_s: self.workload.timeout_s,
                    link: &job.checkpoint,
                })
                .await
        })
    }

    fn left_over(self: std::sync::Arc<Self>, checkpoints: Vec<Checkpoint>) -> Task<()> {
        Box::pin(async move {
            for c in &checkpoints {
                self.lava.cancel_left_over(c).await;
            }
        })
    }
}

/// A LAVA farm.
pub struct LavaHost {
    name: String,
    cfg: LavaConfig,
    agent_binary: PathBuf,
    work: PathBuf,
    http: reqwest::Client,
    token: OnceLock<String>,
    base_initramfs: OnceLock<Vec<u8>>,
    modules: Mutex<Option<(PathBuf, Vec<u8>)>>,
    /// This hunt's jobs submitted and not finished.
    in_flight: std::sync::atomic::AtomicUsize,
    /// Held while a boot waits for room on the farm, so that two boots do not both take the
    /// last device.
    gate: tokio::sync::Mutex<()>,
}

/// Counts a job in flight until dropped.
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// What the REST API says of a job (`GET /api/v0.2/jobs/<id>/`).
#[derive(Debug, Clone, serde::Deserialize)]
struct JobInfo {
    state: String,
    health: String,
    actual_device: Option<String>,
    #[serde(default)]
    failure_comment: Option<String>,
}

/// A call that got no answer worth reading: the server is away (down, restarting, a 5xx),
/// and another try may do.
struct Away(String);

impl LavaHost {
    /// A farm host that keeps each job's images under `work`.
    pub fn new(name: &str, cfg: &LavaConfig, agent_binary: &Path, work: &Path) -> LavaHost {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("a reqwest client with timeouts builds");
        LavaHost {
            name: name.to_owned(),
            cfg: cfg.clone(),
            agent_binary: agent_binary.to_owned(),
            work: work.to_owned(),
            http,
            token: OnceLock::new(),
            base_initramfs: OnceLock::new(),
            modules: Mutex::new(None),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            gate: tokio::sync::Mutex::new(()),
        }
    }

    /// The host's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Jobs in flight at most.
    pub fn jobs(&self) -> usize {
        self.cfg.jobs as usize
    }

    /// Checks the tools, the agent and the token (the server is asked at the first job: it
    /// may be restarting, which costs only time).
    pub fn preflight(&self) -> Result<(), HostError> {
        if super::qemu::which("mkfs.ext4").is_none() {
            return Err(HostError::Missing(
                "mkfs.ext4 is not installed: apt install e2fsprogs".into(),
            ));
        }
        if !Path::new(super::qemu::BUSYBOX).is_file() {
            return Err(HostError::Missing(format!(
                "{} is missing: apt install busybox-static",
                super::qemu::BUSYBOX
            )));
        }
        if !self.agent_binary.is_file() {
            return Err(HostError::Missing(format!(
                "agent binary {} is missing: run scripts/build-agent, or set FIRSTBAD_AGENT",
                self.agent_binary.display()
            )));
        }
        let token = match &self.cfg.token {
            LavaToken::File(f) => {
                let read = read_token_file(f).map_err(|e| {
                    HostError::Missing(format!(
                        "host {}: token_file {}: {e}: put the LAVA API token there (lava-server manage tokens add --user NAME prints one)",
                        self.name,
                        f.display()
                    ))
                })?;
                if read.world_readable {
                    tracing::warn!(
                        "host {}: token_file {} can be read by every user of this machine \
                         (mode {:o}): chmod 600 {}",
                        self.name,
                        f.display(),
                        read.mode,
                        f.display()
                    );
                }
                read.text
            }
            LavaToken::Env(v) => std::env::var(v).map_err(|_| {
                HostError::Missing(format!(
                    "host {}: token_env {v}: the variable is not set: export {v}=<the LAVA API token>",
                    self.name
                ))
            })?,
        };
        let token = token.trim();
        if token.is_empty() {
            return Err(HostError::Missing(format!(
                "host {}: the LAVA API token is empty",
                self.name
            )));
        }
        let _ = self.token.set(token.to_owned());
        Ok(())
    }

    /// One boot: a job submitted (or re-attached to), followed to its end, its result read
    /// from its log. A failed boot is the candidate's or the farm's, never a verdict; `Err` is
    /// the farm's own trouble past its deadlines.
    pub async fn boot(&self, b: FarmBoot<'_>) -> Result<BootOutcome, HostError> {
        if let Some(parent) = b.console.parent() {
            std::fs::create_dir_all(parent).map_err(|source| HostError::Io {
                what: "creating the console log directory".into(),
                source,
            })?;
        }
        // A re-attached job's log is read again from its first line: the console starts over.
        let mut console = tokio::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(b.console)
            .await
            .map_err(|source| HostError::Io {
                what: format!("opening {}", b.console.display()),
                source,
            })?;
        let mut say = Say(&mut console);

        // Re-attach to the job an earlier run journalled, by id, else by its token.
        let mut attached = None;
        if let Some(r) = b
            .link
            .resume
            .as_ref()
            .and_then(|c| JobMark::of(c, &self.name))
        {
            let id = match &r.job {
                Some(id) => Some(id.clone()),
                None => {
                    let found = self.find(&r.token).await?;
                    if let Some(id) = &found {
                        JobMark {
                            token: r.token.clone(),
                            job: Some(id.clone()),
                        }
                        .write(b.link, &b, &self.name)
                        .await?;
                    }
                    found
                }
            };
            if let Some(id) = id {
                if self.job(&id).await?.is_some() {
                    self.in_flight
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    say.line(&format!("[lava] re-attached to job {id} of an earlier run"))
                        .await;
                    tracing::info!(host = %self.name, "re-attached to LAVA job {id}");
                    attached = Some((id, r.token.clone()));
                }
            }
        }
        let (id, token, _in_flight) = match attached {
            Some((id, token)) => (id, token, InFlight(&self.in_flight)),
            None => {
                let room = self.room().await?;
                // Unique on the farm, and short: it tags every result line on the console.
                let token = format!(
                    "fb-{}-{}-{}",
                    crate::ids::short(b.commit),
                    b.boot,
                    &super::session::random_token()[..16]
                );
                let dir = self.work.join("jobs").join(&token);
                self.images(&b, &token, &dir).await?;
                let definition = self.definition(&b, &token, &dir);
                std::fs::write(dir.join("job.json"), &definition).map_err(|source| {
                    HostError::Io {
                        what: "writing the job definition".into(),
                        source,
                    }
                })?;
                // The intent is on disk before the job exists.
                let mut mark = JobMark {
                    token: token.clone(),
                    job: None,
                };
                mark.write(b.link, &b, &self.name).await?;
                let id = self.submit(&definition, &token).await?;
                mark.job = Some(id.clone());
                mark.write(b.link, &b, &self.name).await?;
                say.line(&format!(
                    "[lava] submitted job {id} to {} ({token})",
                    self.cfg.server
                ))
                .await;
                tracing::info!(host = %self.name, "submitted LAVA job {id}");
                (id, token, room)
            }
        };
        let outcome = self.follow(&b, &id, &token, &mut say).await?;
        // The job has ended: its worker copied the files long ago. (On a host error they are
        // kept: the job may still be queued, and a rerun re-attaches to it.)
        let _ = std::fs::remove_dir_all(self.work.join("jobs").join(&token));
        Ok(outcome)
    }

    /// Follows job `id` to its end.
    async fn follow(
        &self,
        b: &FarmBoot<'_>,
        id: &str,
        token: &str,
        say: &mut Say<'_>,
    ) -> Result<BootOutcome, HostError> {
        let mut seen = Seen::new(token);
        let mut lines_read = 0usize;
        let mut device: Option<String> = None;
        let mut result_at: Option<Instant> = None;
        let queued = Instant::now();
        loop {
            let Some(info) = self.job(id).await? else {
                return Ok(BootOutcome::Failed {
                    reason: format!(
                        "LAVA job {id} is gone from the server {} (deleted?)",
                        self.cfg.server
                    ),
                    console: b.console.to_owned(),
                    untestable: false,
                });
            };
            if info.state == "Running" && seen.running_since.is_none() {
                seen.running_since = Some(Instant::now());
            }
            if device.is_none() {
                if let Some(d) = &info.actual_device {
                    device = Some(d.clone());
                    say.line(&format!("[lava] job {id} runs on device {d}"))
                        .await;
                }
            }
            // Once the job is Finished, its log is read once more: its last lines may have
            // come after the state was read.
            let finished = info.state == "Finished";
            for _ in 0..1 + usize::from(finished) {
                let (read, lines) = self.log_lines(id, lines_read).await?;
                lines_read += read;
                for l in &lines {
                    if let Some(text) = seen.take(l) {
                        say.line(&text).await;
                    }
                }
            }
            if seen.decoder.outcome().is_some() && result_at.is_none() {
                result_at = Some(Instant::now());
            }
            if finished {
                say.line(&format!(
                    "[lava] job {id} finished: {}{}",
                    info.health,
                    seen.job_error
                        .as_deref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                ))
                .await;
                return Ok(seen.outcome(b, id, &info));
            }
            if seen.cancelled_by_us.is_none() {
                let why = if let Some(f) = &seen.fatal {
                    Some(format!("boot failed: {f}"))
                } else if result_at.is_some_and(|t| t.elapsed() > END_GRACE) {
                    // The result is in; a guest that does not power off must not hold the
                    // device.
                    Some(String::new())
                } else if seen
                    .running_since
                    .is_some_and(|t| t.elapsed().as_secs() > self.cfg.job_timeout_s)
                {
                    Some(format!(
                        "LAVA job {id} did not finish within {} s of starting \
                         (hosts.job_timeout_s); cancelled",
                        self.cfg.job_timeout_s
                    ))
                } else {
                    None
                };
                if let Some(why) = why {
                    say.line(&format!("[lava] cancelling job {id}: {why}"))
                        .await;
                    self.cancel(id).await;
                    seen.cancelled_by_us = Some(why);
                }
            }
            let status = match &device {
                None => format!("LAVA job {id} queued for {} s", queued.elapsed().as_secs()),
                Some(d) if seen.agent_at.is_some() => {
                    format!("LAVA job {id} on {d}: workload running")
                }
                Some(d) => format!("LAVA job {id} on {d}: booting"),
            };
            super::super::exec::kernel::status(&status);
            tokio::time::sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_gives_console_lines_and_lavas_verdict() {
        let body = r#"- {"dt": "2026-12-02T14:07:01.336892", "lvl": "info", "msg": "start: 1 tmpfs-deploy"}
- {"dt": "2026-12-02T14:07:01.336892", "lvl": "target", "msg": "firstbad-init: up 6.1.0-57-cloud-amd64"}
- {"dt": "2026-12-02T14:07:01.345382", "lvl": "results", "msg": {"case": "uptime", "definition": "firstbad", "measurement": "1.98", "result": "pass", "units": "s"}}
- {"dt": "2026-12-02T14:07:02", "lvl": "results", "msg": {"case": "job", "definition": "lava", "result": "fail", "error_type": "Infrastructure", "error_msg": "Connection closed"}}
"#;
        let lines = parse_log(body);
        assert_eq!(
            lines[1],
            LogLine::Target("firstbad-init: up 6.1.0-57-cloud-amd64".into())
        );
        assert_eq!(
            lines[3],
            LogLine::JobResult(Some("Infrastructure: Connection closed".into()))
        );
        assert!(matches!(&lines[0], LogLine::Other(l, _) if l == "info"));
    }

    // Issue 32, finding 5: a token file that is a device or a FIFO is refused at once, never
    // read without end or waited on.
    /// Issue 32, finding 7: a token file every user of the machine can read was read without
    /// a word; its reader says so, and the host warns with the fix (chmod 600).
    #[test]
    fn a_world_readable_token_file_is_named_as_such() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "abc123\n").unwrap();
        for (mode, exposed) in [(0o644, true), (0o604, true), (0o640, false), (0o600, false)] {
            std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).unwrap();
            let read = read_token_file(&token).unwrap();
            assert_eq!(read.text, "abc123\n");
            assert_eq!(read.world_readable, exposed, "mode {mode:o}");
        }
    }

    #[test]
    fn a_token_file_is_a_small_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "abc123\n").unwrap();
        assert_eq!(read_token_file(&token).unwrap().text, "abc123\n");
        let e = read_token_file(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo(3) on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_token_file(&fifo).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::write(&token, "x".repeat(5000)).unwrap();
        assert!(read_token_file(&token).unwrap_err().contains("not a token"));
    }

    #[test]
    fn a_passed_job_has_no_error() {
        let body = r#"- {"dt": "x", "lvl": "results", "msg": {"case": "job", "definition": "lava", "result": "pass"}}"#;
        assert_eq!(parse_log(body), [LogLine::JobResult(None)]);
    }

    /// What a finished job means, from what the job printed and what LAVA said: pure logic,
    /// no server (tests/lava.rs drives the real one).
    #[test]
    fn a_finished_job_is_measured_only_with_its_result_and_the_right_kernel() {
        let workload: Workload =
            toml::from_str(include_str!("../../../workloads/fsync-latency.toml")).unwrap();
        let link = CheckpointLink::default();
        let b = FarmBoot {
            commit: "0123456789abcdef",
            boot: 1,
            image: Path::new("/k"),
            release: "6.1.0-fb0123456789ab",
            console: Path::new("/tmp/c.log"),
            workload: &workload,
            metric: "fsync_latency_p50_ms",
            workload_timeout_s: 60,
            link: &link,
        };
        let identity = |release: &str| firstbad_wire::Identity {
            protocol: firstbad_wire::PROTOCOL_VERSION,
            agent_version: "0".into(),
            kernel_release: release.into(),
            boot_id: "b".into(),
            hostname: "g".into(),
        };
        let mut result: firstbad_wire::WorkloadResult =
            serde_json::from_value(serde_json::json!({"kind": "fsync-latency", "series": {}, "metrics": {}, "duration_s": 1.0})).unwrap();
        result.metrics.insert("fsync_latency_p50_ms".into(), 4.5);
        let decoded = |release: &str, r: Result<firstbad_wire::WorkloadResult, String>| {
            let mut d = Decoder::new("tok");
            for l in firstbad_wire::oneshot::encode("tok", &identity(release), &r) {
                d.line(&format!("[   3.1] {l}"));
            }
            d
        };
        let info = |health: &str| JobInfo {
            state: "Finished".into(),
            health: health.into(),
            actual_device: Some("qemu-01".into()),
            failure_comment: None,
        };
        let reason = |o: BootOutcome| match o {
            BootOutcome::Failed { reason, .. } => reason,
            m => panic!("not a failed boot: {m:?}"),
        };
        // What following the job read: the agent's lines (through the decoder), a fatal
        // console line, LAVA's error, firstbad's own cancel.
        let seen =
            |d: Decoder, fatal: Option<&str>, job_error: Option<&str>, ours: Option<&str>| Seen {
                decoder: d,
                fatal: fatal.map(str::to_owned),
                job_error: job_error.map(str::to_owned),
                cancelled_by_us: ours.map(str::to_owned),
                ..Seen::new("tok")
            };
        let ok = || decoded(b.release, Ok(result.clone()));
        let o = seen(ok(), None, None, None).outcome(&b, "7", &info("Complete"));
        assert!(
            matches!(o, BootOutcome::Measured { value, .. } if value == 4.5),
            "{o:?}"
        );
        let none = || Decoder::new("tok");
        for (seen, health, words) in [
            // A panic seen on the console wins over anything printed.
            (
                seen(ok(), Some("Kernel panic - not syncing: x"), None, None),
                "Complete",
                "Kernel panic",
            ),
            (
                seen(decoded("6.1.0-other", Ok(result.clone())), None, None, None),
                "Complete",
                "wrong kernel",
            ),
            (
                seen(
                    decoded(b.release, Err("scratch full".into())),
                    None,
                    None,
                    None,
                ),
                "Complete",
                "workload failed: scratch full",
            ),
            (
                seen(none(), None, None, None),
                "Canceled",
                "canceled on the farm, not by firstbad",
            ),
            (
                seen(
                    none(),
                    None,
                    Some("Infrastructure: Connection closed"),
                    None,
                ),
                "Incomplete",
                "ended Incomplete: Infrastructure: Connection closed",
            ),
            (
                seen(
                    none(),
                    None,
                    None,
                    Some("LAVA job 7 did not finish within 60 s"),
                ),
                "Canceled",
                "did not finish",
            ),
            (
                seen(none(), None, None, None),
                "Complete",
                "printed no result",
            ),
        ] {
            let r = reason(seen.outcome(&b, "7", &info(health)));
            assert!(r.contains(words), "{health}: {r}");
        }
    }

    #[test]
    fn long_server_text_is_clipped_to_one_line() {
        let c = clip(&"Traceback\n  x ".repeat(100));
        assert!(!c.contains('\n'));
        assert!(c.chars().count() <= 301, "{}", c.chars().count());
    }
}
