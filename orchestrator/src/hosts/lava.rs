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

/// The most a token file may hold: a LAVA token is 32-128 characters.
const TOKEN_FILE_LIMIT: u64 = 4096;

/// A token file's text, and whether every user of the machine can read it.
#[derive(Debug)]
struct TokenFile {
    text: String,
    /// Readable by others (`o+r`): the host warns, asking for `chmod 600` (issue 32,
    /// finding 7).
    world_readable: bool,
    /// Its permission bits, for the warning.
    mode: u32,
}

/// A token file's text: a regular file of at most [`TOKEN_FILE_LIMIT`] bytes, opened without
/// waiting, so that a FIFO or a device named by mistake is refused instead of blocking or read
/// without end (issue 32, finding 5: /dev/zero took 545 MB).
fn read_token_file(path: &Path) -> Result<TokenFile, String> {
    use std::os::unix::fs::PermissionsExt;
    let file = crate::files::open_regular(path).map_err(|e| e.to_string())?;
    let mode = file
        .metadata()
        .map_err(|e| e.to_string())?
        .permissions()
        .mode()
        & 0o7777;
    let bytes = crate::files::read_capped(file, TOKEN_FILE_LIMIT).map_err(|e| match e {
        crate::files::FileError::TooLarge { .. } => format!("{e}: not a token"),
        e => e.to_string(),
    })?;
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text: not a token".to_owned())?;
    Ok(TokenFile {
        text,
        world_readable: mode & 0o004 != 0,
        mode,
    })
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

    fn api(&self, path: &str) -> String {
        format!("{}/api/v0.2/{path}", self.cfg.server)
    }

    fn authed(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.token.get() {
            Some(t) => rb.header("Authorization", format!("Token {t}")),
            None => rb,
        }
    }

    /// One call: its status and body, or why there is none.
    async fn call(&self, rb: reqwest::RequestBuilder) -> Result<(u16, String), Away> {
        let r = self
            .authed(rb)
            .send()
            .await
            .map_err(|e| Away(format!("{e}")))?;
        let status = r.status().as_u16();
        let body = r
            .text()
            .await
            .map_err(|e| Away(format!("reading the answer: {e}")))?;
        if status >= 500 || status == 429 {
            // gunicorn restarting, a proxy in front of it: the server is away.
            return Err(Away(format!("HTTP {status}")));
        }
        Ok((status, body))
    }

    /// A call retried while the server is away, with doubling waits, until
    /// `server_deadline_s` has passed since its first failure.
    async fn call_retrying<F>(&self, what: &str, make: F) -> Result<(u16, String), HostError>
    where
        F: Fn() -> reqwest::RequestBuilder,
    {
        let first = Instant::now();
        let deadline = Duration::from_secs(self.cfg.server_deadline_s);
        let mut wait = Duration::from_secs(1);
        loop {
            match self.call(make()).await {
                Ok(answer) => return Ok(answer),
                Err(Away(why)) => {
                    let waited = first.elapsed();
                    if waited >= deadline {
                        return Err(self.server_gone(what, waited, &why));
                    }
                    tracing::warn!(
                        host = %self.name,
                        "LAVA server {} does not answer ({why}) while {what}; trying again in {} s",
                        self.cfg.server,
                        wait.as_secs()
                    );
                    super::super::exec::kernel::status(&format!(
                        "LAVA server away for {} s: {why}",
                        waited.as_secs()
                    ));
                    tokio::time::sleep(wait.min(deadline.saturating_sub(waited))).await;
                    wait = (wait * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// The server has not answered for longer than `server_deadline_s`.
    fn server_gone(&self, what: &str, waited: Duration, why: &str) -> HostError {
        self.needs_person(
            what,
            &format!(
                "the LAVA server {} has not answered for {} s (hosts.server_deadline_s = {}): {why}",
                self.cfg.server,
                waited.as_secs(),
                self.cfg.server_deadline_s
            ),
        )
    }

    fn needs_person(&self, what: &str, why: &str) -> HostError {
        HostError::NeedsPerson {
            host: self.name.clone(),
            why: format!("{what}: {why}"),
        }
    }

    /// The job, or `None` if the server does not know it.
    async fn job(&self, id: &str) -> Result<Option<JobInfo>, HostError> {
        let url = self.api(&format!("jobs/{id}/"));
        let (status, body) = self
            .call_retrying(&format!("reading LAVA job {id}"), || self.http.get(&url))
            .await?;
        match status {
            200 => serde_json::from_str(&body).map(Some).map_err(|e| {
                self.needs_person(
                    &format!("reading LAVA job {id}"),
                    &format!("an answer firstbad cannot read ({e}): {}", clip(&body)),
                )
            }),
            404 => Ok(None),
            _ => Err(self.needs_person(
                &format!("reading LAVA job {id}"),
                &format!("HTTP {status}: {}", clip(&body)),
            )),
        }
    }

    /// The newest job whose definition holds `token`, if any.
    async fn find(&self, token: &str) -> Result<Option<String>, HostError> {
        let url = self.api("jobs/");
        let (status, body) = self
            .call_retrying("looking for a job by its token", || {
                self.http.get(&url).query(&[
                    ("original_definition__contains", token),
                    ("ordering", "-id"),
                    ("limit", "1"),
                ])
            })
            .await?;
        if status != 200 {
            return Err(self.needs_person(
                "looking for a job by its token",
                &format!("HTTP {status}: {}", clip(&body)),
            ));
        }
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        Ok(v["results"]
            .as_array()
            .and_then(|r| r.first())
            .and_then(|j| j["id"].as_i64())
            .map(|id| id.to_string()))
    }

    /// Submits `definition`; the job's id. A submission whose answer was lost (the server
    /// went away mid-call) is looked for by its token before it is sent again.
    async fn submit(&self, definition: &str, token: &str) -> Result<String, HostError> {
        let url = self.api("jobs/");
        let body = serde_json::json!({ "definition": definition });
        let first = Instant::now();
        let mut wait = Duration::from_secs(1);
        loop {
            match self.call(self.http.post(&url).json(&body)).await {
                Ok((201, answer)) => {
                    let v: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
                    return v["job_ids"][0]
                        .as_i64()
                        .map(|id| id.to_string())
                        .ok_or_else(|| {
                            self.needs_person(
                                "submitting a job",
                                &format!("an answer without a job id: {}", clip(&answer)),
                            )
                        });
                }
                Ok((status @ (401 | 403), answer)) => {
                    return Err(self.needs_person(
                        "submitting a job",
                        &format!(
                            "the server refused the token (HTTP {status}: {}): check {}",
                            clip(&answer),
                            match &self.cfg.token {
                                LavaToken::File(f) => format!("token_file {}", f.display()),
                                LavaToken::Env(v) => format!("token_env {v}"),
                            }
                        ),
                    ))
                }
                Ok((status, answer)) => {
                    return Err(self.needs_person(
                        "submitting a job",
                        &format!(
                            "HTTP {status}: {} (device_type {:?}, tags {:?})",
                            clip(&answer),
                            self.cfg.device_type,
                            self.cfg.tags
                        ),
                    ))
                }
                Err(Away(why)) => {
                    if let Ok(Some(id)) = self.find(token).await {
                        return Ok(id);
                    }
                    let waited = first.elapsed();
                    if waited.as_secs() >= self.cfg.server_deadline_s {
                        return Err(self.server_gone("submitting a job", waited, &why));
                    }
                    tracing::warn!(host = %self.name, "LAVA server does not take the job ({why}); trying again in {} s", wait.as_secs());
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Cancels the job an earlier run left for a boot the hunt no longer needs.
    pub async fn cancel_left_over(&self, left: &Checkpoint) {
        let Some(record) = JobMark::of(left, &self.name) else {
            return;
        };
        let id = match &record.job {
            Some(id) => Some(id.clone()),
            None => self.find(&record.token).await.ok().flatten(),
        };
        if let Some(id) = id {
            if let Ok(Some(info)) = self.job(&id).await {
                if info.state != "Finished" {
                    tracing::info!(host = %self.name, "cancelling LAVA job {id}: left by an earlier run, no longer needed");
                    self.cancel(&id).await;
                }
            }
        }
    }

    /// Devices the jobs can run on: of the device type, carrying every tag, in health Good or
    /// Unknown (Maintenance, Bad, Looping and Retired ones take no jobs).
    async fn usable_devices(&self) -> Result<usize, HostError> {
        let what = "counting the farm's devices";
        let url = self.api("devices/");
        let (status, body) = self
            .call_retrying(what, || {
                self.http.get(&url).query(&[
                    ("device_type", self.cfg.device_type.as_str()),
                    ("limit", "1000"),
                ])
            })
            .await?;
        if status != 200 {
            return Err(self.needs_person(what, &format!("HTTP {status}: {}", clip(&body))));
        }
        let devices: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let mut wanted = Vec::new();
        if !self.cfg.tags.is_empty() {
            let url = self.api("tags/");
            let (status, body) = self
                .call_retrying(what, || self.http.get(&url).query(&[("limit", "1000")]))
                .await?;
            if status != 200 {
                return Err(self.needs_person(what, &format!("HTTP {status}: {}", clip(&body))));
            }
            let tags: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            for t in &self.cfg.tags {
                let id = tags["results"].as_array().and_then(|r| {
                    r.iter()
                        .find(|x| x["name"] == t.as_str())
                        .and_then(|x| x["id"].as_i64())
                });
                match id {
                    Some(id) => wanted.push(id),
                    None => return Ok(0),
                }
            }
        }
        Ok(devices["results"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter(|d| matches!(d["health"].as_str(), Some("Good" | "Unknown")))
                    .filter(|d| {
                        let has = d["tags"].as_array().cloned().unwrap_or_default();
                        wanted
                            .iter()
                            .all(|w| has.iter().any(|h| h.as_i64() == Some(*w)))
                    })
                    .count()
            })
            .unwrap_or(0))
    }

    /// Waits until this hunt has fewer jobs on the farm than the farm has devices to run
    /// them, then counts one more: boots go out as devices free, and none waits in LAVA's
    /// queue for a device another of ours holds.
    async fn room(&self) -> Result<InFlight<'_>, HostError> {
        use std::sync::atomic::Ordering::SeqCst;
        let _gate = self.gate.lock().await;
        let mut warned: Option<Instant> = None;
        loop {
            let usable = self.usable_devices().await?;
            let running = self.in_flight.load(SeqCst);
            if running < usable {
                self.in_flight.fetch_add(1, SeqCst);
                return Ok(InFlight(&self.in_flight));
            }
            if usable == 0 && warned.is_none_or(|t| t.elapsed() > Duration::from_secs(600)) {
                tracing::warn!(
                    host = %self.name,
                    "no device of type {:?}{} can take a job on {} (all in Maintenance, Bad or \
                     Retired?): waiting for one",
                    self.cfg.device_type,
                    if self.cfg.tags.is_empty() { String::new() } else { format!(" with tags {:?}", self.cfg.tags) },
                    self.cfg.server
                );
                warned = Some(Instant::now());
            }
            super::super::exec::kernel::status(&format!(
                "waiting for a free device: {running} jobs of ours on {usable} usable devices"
            ));
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sends a cancel (GET, as LAVA 2023.01 wants it); its answer says nothing either way.
    async fn cancel(&self, id: &str) {
        let url = self.api(&format!("jobs/{id}/cancel/"));
        let _ = self.call(self.http.get(&url)).await;
    }

    /// Log lines of job `id` from line `start` (0-based): how many were read, and those
    /// firstbad reads; none when there are no new ones.
    async fn log_lines(&self, id: &str, start: usize) -> Result<(usize, Vec<LogLine>), HostError> {
        let url = self.api(&format!("jobs/{id}/logs/"));
        let (status, body) = self
            .call_retrying(&format!("reading LAVA job {id}'s log"), || {
                self.http.get(&url).query(&[("start", start.to_string())])
            })
            .await?;
        // 404: past the end (or no log yet).
        if status != 200 {
            return Ok((0, Vec::new()));
        }
        let read = body.lines().filter(|l| l.starts_with("- ")).count();
        Ok((read, parse_log(&body)))
    }

    fn base_initramfs(&self) -> Result<Vec<u8>, HostError> {
        if let Some(b) = self.base_initramfs.get() {
            return Ok(b.clone());
        }
        let b = super::qemu::base_initramfs(&self.agent_binary)?;
        let _ = self.base_initramfs.set(b.clone());
        Ok(b)
    }

    fn modules(&self, image: &Path, release: &str) -> Result<Vec<u8>, HostError> {
        let mut m = self.modules.lock().expect("no panic holds the lock");
        if let Some((i, a)) = &*m {
            if i == image {
                return Ok(a.clone());
            }
        }
        let a = super::qemu::modules_archive(image, release)?;
        *m = Some((image.to_owned(), a.clone()));
        Ok(a)
    }

    /// Writes the job's files under `dir`: kernel, initramfs (token, workload, modules) and
    /// scratch image.
    async fn images(&self, b: &FarmBoot<'_>, token: &str, dir: &Path) -> Result<(), HostError> {
        let io = |what: String| move |source| HostError::Io { what, source };
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let kernel = dir.join("vmlinuz");
        let _ = std::fs::remove_file(&kernel);
        if std::fs::hard_link(b.image, &kernel).is_err() {
            std::fs::copy(b.image, &kernel).map_err(io(format!(
                "copying {} to {}",
                b.image.display(),
                kernel.display()
            )))?;
        }
        let mut initramfs = self.base_initramfs()?;
        let workload = serde_json::to_vec(b.workload).expect("a workload serialises");
        let mut extra = Archive::new();
        extra
            .file("etc/firstbad/token", 0o600, format!("{token}\n").as_bytes())
            .file("etc/firstbad/workload.json", 0o644, &workload);
        initramfs.extend_from_slice(&extra.finish());
        initramfs.extend_from_slice(&self.modules(b.image, b.release)?);
        std::fs::write(dir.join("initramfs.cpio"), &initramfs)
            .map_err(io("writing the job's initramfs".into()))?;
        super::qemu::make_scratch(&dir.join("scratch.img"), self.cfg.scratch_mb).await
    }

    /// The URL of one of the job's files, as the farm's workers fetch it.
    fn url(&self, dir: &Path, file: &str) -> String {
        match &self.cfg.images_url {
            Some(base) => format!(
                "{base}/{}/{file}",
                dir.file_name().unwrap_or_default().to_string_lossy()
            ),
            None => format!("file://{}", dir.join(file).display()),
        }
    }

    /// The job definition (JSON, which LAVA's YAML loader reads as it is).
    fn definition(&self, b: &FarmBoot<'_>, token: &str, dir: &Path) -> String {
        let cmdline = format!(
            "console=ttyS0 panic=-1 oops=panic {}",
            self.cfg.extra_cmdline
        );
        let cmdline = cmdline.trim();
        let secs = |s: u64| serde_json::json!({ "seconds": s });
        // The test action is the lease on the guest: the workload's time and room for the
        // result's lines.
        let lease = b.workload_timeout_s + 300;
        let mut job = serde_json::json!({
            "device_type": self.cfg.device_type,
            "job_name": format!("firstbad {} {} boot {}", self.name, crate::hunt::short(b.commit), b.boot),
            "visibility": "public",
            "priority": "medium",
            "timeouts": {
                "job": secs(self.cfg.job_timeout_s),
                "action": secs(self.cfg.job_timeout_s),
                "connection": secs(120),
            },
            "context": { "arch": "amd64" },
            "metadata": {
                "firstbad.run": token,
                "firstbad.commit": b.commit,
                "firstbad.boot": b.boot.to_string(),
            },
            "actions": [
                { "deploy": {
                    "to": "tmpfs",
                    "timeout": secs(300),
                    "images": {
                        "kernel": {
                            "image_arg": format!("-kernel {{kernel}} -append \"{cmdline}\""),
                            "url": self.url(dir, "vmlinuz"),
                        },
                        "initrd": {
                            "image_arg": "-initrd {initrd}",
                            "url": self.url(dir, "initramfs.cpio"),
                        },
                        "scratch": {
                            "image_arg": "-drive file={scratch},format=raw,if=virtio,cache=writeback",
                            "url": self.url(dir, "scratch.img"),
                        },
                    },
                }},
                { "boot": { "method": "qemu", "media": "tmpfs", "timeout": secs(600) } },
                { "test": {
                    "timeout": secs(lease),
                    "monitors": [{
                        "name": "firstbad",
                        "start": "firstbad-init: starting agent",
                        "end": "firstbad-init: agent exited",
                        "pattern": firstbad_wire::oneshot::LAVA_RESULT_PATTERN,
                        "fixupdict": { "PASS": "pass", "FAIL": "fail" },
                    }],
                }},
            ],
        });
        if !self.cfg.tags.is_empty() {
            job["tags"] = serde_json::json!(self.cfg.tags);
        }
        serde_json::to_string_pretty(&job).expect("a job serialises")
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
                    crate::hunt::short(b.commit),
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

/// What following a job has read of it: the agent's lines, the console's verdict, LAVA's own.
struct Seen {
    decoder: Decoder,
    scanner: ConsoleScanner,
    /// The first console line that fails the boot.
    fatal: Option<String>,
    /// LAVA's error for the job (its `job` case), if it failed.
    job_error: Option<String>,
    /// Why firstbad cancelled the job ("" once the result was in), if it did.
    cancelled_by_us: Option<String>,
    running_since: Option<Instant>,
    agent_at: Option<Instant>,
}

impl Seen {
    fn new(token: &str) -> Seen {
        Seen {
            decoder: Decoder::new(token),
            scanner: ConsoleScanner::default(),
            fatal: None,
            job_error: None,
            cancelled_by_us: None,
            running_since: None,
            agent_at: None,
        }
    }

    /// Takes one log line; the text the boot's console log gets for it, if any.
    fn take(&mut self, l: &LogLine) -> Option<String> {
        match l {
            LogLine::Target(text) => {
                self.decoder.line(text);
                if text.contains("firstbad-init: starting agent") && self.agent_at.is_none() {
                    self.agent_at = Some(Instant::now());
                }
                if self.fatal.is_none() {
                    self.fatal = self.scanner.line(text);
                }
                Some(text.clone())
            }
            LogLine::JobResult(why) => {
                self.job_error = why.clone();
                None
            }
            LogLine::Other(lvl, text) if lvl == "error" || lvl == "exception" => {
                Some(format!("[lava:{lvl}] {text}"))
            }
            LogLine::Other(..) => None,
        }
    }

    /// What a finished job means for the hunt.
    fn outcome(&self, b: &FarmBoot<'_>, id: &str, info: &JobInfo) -> BootOutcome {
        let failed = |reason: String| BootOutcome::Failed {
            reason,
            console: b.console.to_owned(),
            untestable: false,
        };
        if let Some(f) = &self.fatal {
            return failed(format!("boot failed: {f} (LAVA job {id})"));
        }
        let identity = self.decoder.identity();
        if let Some(idn) = identity {
            if idn.kernel_release != b.release {
                return failed(format!(
                    "wrong kernel: the agent reports {:?}, expected {:?} (LAVA job {id})",
                    idn.kernel_release, b.release
                ));
            }
        }
        match (self.decoder.outcome(), identity) {
            (Some(Ok(result)), Some(idn)) => match super::metric_value(&result, b.metric) {
                Ok(value) => BootOutcome::Measured {
                    kernel_release: idn.kernel_release.clone(),
                    boot_id: idn.boot_id.clone(),
                    value,
                    console: b.console.to_owned(),
                    boot_seconds: match (self.running_since, self.agent_at) {
                        (Some(r), Some(a)) => a.saturating_duration_since(r).as_secs_f64(),
                        _ => 0.0,
                    },
                    result,
                },
                Err(reason) => failed(reason),
            },
            (Some(Err(why)), _) => failed(format!("workload failed: {why} (LAVA job {id})")),
            _ => {
                let comment = info
                    .failure_comment
                    .as_deref()
                    .map(|c| format!("; {}", clip(c)))
                    .unwrap_or_default();
                failed(match (info.health.as_str(), &self.cancelled_by_us) {
                    (_, Some(why)) if !why.is_empty() => why.clone(),
                    ("Canceled", _) => {
                        format!("LAVA job {id} was canceled on the farm, not by firstbad{comment}")
                    }
                    ("Complete", _) => {
                        format!("LAVA job {id} ended Complete but the agent printed no result")
                    }
                    (health, _) => format!(
                        "LAVA job {id} ended {health}: {}{comment}",
                        self.job_error.as_deref().unwrap_or("no reason given")
                    ),
                })
            }
        }
    }
}

/// Writes a job's console log, line by line.
struct Say<'a>(&'a mut tokio::fs::File);

impl Say<'_> {
    async fn line(&mut self, text: &str) {
        let _ = self.0.write_all(text.as_bytes()).await;
        let _ = self.0.write_all(b"\n").await;
        let _ = self.0.flush().await;
    }
}

/// One line of a LAVA job log.
#[derive(Debug, PartialEq)]
enum LogLine {
    /// The device's console (`lvl: target`).
    Target(String),
    /// LAVA's own verdict on the job (the `job` case of suite `lava`): `None` for a pass,
    /// else its error type and message.
    JobResult(Option<String>),
    /// Anything else: its level and text.
    Other(String, String),
}

/// A job log as `GET /jobs/<id>/logs/` sends it: YAML, one flow mapping a line
/// (`- {"dt": …, "lvl": …, "msg": …}`), which is JSON after the dash.
fn parse_log(body: &str) -> Vec<LogLine> {
    body.lines()
        .filter_map(|l| {
            let json = l.trim_start().strip_prefix("- ")?;
            let v: serde_json::Value = serde_json::from_str(json).ok()?;
            let lvl = v["lvl"].as_str().unwrap_or("").to_owned();
            let msg = &v["msg"];
            Some(match (lvl.as_str(), msg) {
                ("target" | "feedback", serde_json::Value::String(s)) => LogLine::Target(s.clone()),
                ("results", m) if m["definition"] == "lava" && m["case"] == "job" => {
                    LogLine::JobResult(match m["result"].as_str() {
                        Some("pass") => None,
                        _ => Some(format!(
                            "{}: {}",
                            m["error_type"].as_str().unwrap_or("error"),
                            m["error_msg"].as_str().map(clip).unwrap_or_default()
                        )),
                    })
                }
                (_, serde_json::Value::String(s)) => LogLine::Other(lvl, s.clone()),
                (_, m) => LogLine::Other(lvl, m.to_string()),
            })
        })
        .collect()
}

/// At most 300 characters of a server's text, on one line.
fn clip(s: &str) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
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
