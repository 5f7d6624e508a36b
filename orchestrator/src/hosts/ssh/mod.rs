//! The ssh test host: a lab machine firstbad installs kernels on, reboots and measures.
//!
//! One boot: connect and note the boot id; start the console capture (the configured local
//! command, copied to the boot's console log and scanned: panic, oops, `BUG:`, hung task, a
//! second kernel banner); upload the image (and `modules.tar` next to it when the build made
//! modules, unpacked over a removed `/lib/modules/<release>`); install it by kexec, grub-reboot or the user's commands; reboot; wait for SSH
//! with a deadline; check that `uname -r` is the candidate's and the boot id changed; copy
//! the agent, start it with a fresh token and wait for its health check.
//!
//! A machine that does not come back in time is power-cycled with the configured command,
//! waited for again (it boots its default, known-good kernel), and the candidate's boot is
//! recorded as failed: a skip, never a verdict. A machine that does not come back even then
//! is a [`HostError::NeedsPerson`] naming the host, which pauses the hunt.
//!
//! Every SSH call has a deadline firstbad enforces ([`super::ssh_conn`]).
//!
//! This file holds the boot's steps and the session; `install.rs` puts the kernel on the
//! machine and starts the reboot, `console.rs` captures and scans the console.

mod console;
mod install;

use super::ssh_conn::{shell_quote, Conn, SshError};
use super::{BootFailure, HostError};
use crate::agent_client::{AgentClient, AgentError};
use crate::config::SshConfig;
use console::start_console;
use firstbad_wire::{Identity, Workload, WorkloadResult};
use install::{upload_deadline, InstallError};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A lab machine reached over SSH.
pub struct SshHost {
    name: String,
    cfg: SshConfig,
    agent_binary: PathBuf,
    work: PathBuf,
}

/// A booted, verified machine with its agent.
pub struct Session {
    client: AgentClient,
    /// What the agent reported.
    pub identity: Identity,
    /// Seconds from the reboot command to a healthy agent.
    pub boot_seconds: f64,
    console: PathBuf,
    fatal: watch::Receiver<Option<String>>,
    capture: Option<tokio::process::Child>,
    host: SshHost,
}

type BootResult<T> = Result<T, Result<BootFailure, HostError>>;

/// How a wait for SSH ended.
enum Back {
    /// Up, on a boot other than the one before the reboot.
    Up(Conn, String),
    /// The console showed a fatal line first.
    Fatal(String),
    /// Nothing within the deadline.
    Timeout(String),
}

impl SshHost {
    /// An ssh host that keeps its per-boot files under `work`.
    pub fn new(name: &str, cfg: &SshConfig, agent_binary: &Path, work: &Path) -> SshHost {
        SshHost {
            name: name.to_owned(),
            cfg: cfg.clone(),
            agent_binary: agent_binary.to_owned(),
            work: work.to_owned(),
        }
    }

    /// The host's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Checks the local files the host needs: the agent, the key, known_hosts.
    pub fn preflight(&self) -> Result<(), HostError> {
        use super::ssh_conn::{HostKeyCheck, SshAuth};
        if !self.agent_binary.is_file() {
            return Err(HostError::Missing(format!(
                "agent binary {} is missing: run scripts/build-agent, or set FIRSTBAD_AGENT",
                self.agent_binary.display()
            )));
        }
        if let SshAuth::KeyFile(k) = &self.cfg.target.auth {
            if !k.is_file() {
                return Err(HostError::Missing(format!(
                    "host {}: identity_file {} does not exist",
                    self.name,
                    k.display()
                )));
            }
        }
        if let HostKeyCheck::KnownHosts(k) = &self.cfg.target.host_key {
            if !k.is_file() {
                return Err(HostError::Missing(format!(
                    "host {}: known_hosts {} does not exist: add the host's key (ssh-keyscan) or set insecure_ignore_host_key = true",
                    self.name,
                    k.display()
                )));
            }
        }
        Ok(())
    }

    fn command_deadline(&self) -> Duration {
        Duration::from_secs(self.cfg.command_timeout_s)
    }

    async fn connect(&self, limit: Duration) -> Result<Conn, SshError> {
        let d = Duration::from_secs(self.cfg.connect_timeout_s).min(limit);
        Conn::connect(&self.cfg.target, d.max(Duration::from_millis(100))).await
    }

    fn needs_person(&self, why: String) -> HostError {
        HostError::NeedsPerson {
            host: self.name.clone(),
            why,
        }
    }

    /// Power-cycles the machine and waits for SSH on whatever it boots (its default,
    /// known-good kernel). `Ok(note)` says what was done; an error means a person is needed.
    pub async fn recover(&self, why: &str) -> Result<String, HostError> {
        let Some(cmd) = &self.cfg.power_cycle else {
            return Err(self.needs_person(format!(
                "{why}; no power_cycle command is configured (hosts.power_cycle)"
            )));
        };
        tracing::warn!(host = %self.name, "{why}: power-cycling with `{cmd}`");
        let run = tokio::process::Command::new("sh")
            .args(["-c", cmd])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        match tokio::time::timeout(self.command_deadline(), run).await {
            Ok(Ok(out)) if out.status.success() => {}
            Ok(Ok(out)) => {
                return Err(self.needs_person(format!(
                    "{why}; the power_cycle command `{cmd}` failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )))
            }
            Ok(Err(e)) => {
                return Err(self.needs_person(format!(
                    "{why}; the power_cycle command `{cmd}` did not start: {e}"
                )))
            }
            Err(_) => {
                return Err(self.needs_person(format!(
                    "{why}; the power_cycle command `{cmd}` did not finish within {} s",
                    self.cfg.command_timeout_s
                )))
            }
        }
        let (_tx, rx) = watch::channel(None);
        match self.wait_for_ssh(None, rx, self.boot_deadline()).await {
            Back::Up(..) => Ok(format!("power-cycled with `{cmd}`; the host is back")),
            Back::Fatal(line) | Back::Timeout(line) => Err(self.needs_person(format!(
                "{why}; power-cycled with `{cmd}`, and even its default kernel did not come back: {line}"
            ))),
        }
    }

    fn boot_deadline(&self) -> Instant {
        Instant::now() + Duration::from_secs(self.cfg.boot_timeout_s)
    }

    /// Waits until SSH answers on a boot whose id is not `old_boot_id`.
    async fn wait_for_ssh(
        &self,
        old_boot_id: Option<&str>,
        mut fatal: watch::Receiver<Option<String>>,
        deadline: Instant,
    ) -> Back {
        let mut last = String::from("no answer yet");
        loop {
            if let Some(line) = fatal.borrow_and_update().clone() {
                return Back::Fatal(line);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Back::Timeout(last);
            }
            match self.connect(left).await {
                Ok(c) => match c.exec(BOOT_ID, self.command_deadline().min(left)).await {
                    Ok(out) if out.status == 0 => {
                        let id = out.output.trim().to_owned();
                        if Some(id.as_str()) != old_boot_id {
                            return Back::Up(c, id);
                        }
                        last = "the machine has not rebooted yet (same boot id)".into();
                    }
                    Ok(out) => last = format!("reading the boot id: {}", out.output.trim()),
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e.to_string(),
            }
            crate::hosts::session::pause(&mut fatal, Duration::from_secs(1)).await;
        }
    }

    /// Boots `image` and waits for a healthy agent that reports `expected_release`.
    ///
    /// `Err(Ok(failure))` is the candidate's failure; `Err(Err(e))` is the host's.
    pub async fn boot(
        &mut self,
        image: &Path,
        expected_release: &str,
        console: &Path,
    ) -> BootResult<Session> {
        std::fs::create_dir_all(&self.work)
            .map_err(io(format!("creating {}", self.work.display())))
            .map_err(Err)?;
        if let Some(parent) = console.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io("creating the console log directory"))
                .map_err(Err)?;
        }
        let fail = |reason: String| BootFailure {
            reason,
            console: console.to_owned(),
        };
        let cmd_d = self.command_deadline();

        // 1. The machine as it is: up, on some boot.
        let (conn, old_boot_id) = match self.connect(cmd_d).await {
            Ok(c) => match c.check(BOOT_ID, cmd_d).await {
                Ok(id) => (c, id.trim().to_owned()),
                Err(e) => self.reach_after_recovery(&e.to_string()).await?,
            },
            Err(e @ (SshError::HostKeyMismatch { .. } | SshError::UnknownHost { .. })) => {
                return Err(Err(self.needs_person(e.to_string())))
            }
            Err(e) => self.reach_after_recovery(&e.to_string()).await?,
        };

        // 2. The console of this boot.
        let (capture, fatal) = start_console(self.cfg.console.as_deref(), console)
            .await
            .map_err(Err)?;

        // 3. Upload and install.
        let dir = &self.cfg.remote_dir;
        let remote_image = format!("{dir}/vmlinuz-{expected_release}");
        let installed = self
            .install(&conn, image, &remote_image, expected_release)
            .await;
        let reboot_at = Instant::now();
        match installed {
            Ok(()) => {}
            Err(InstallError::Candidate(why)) => {
                drop(capture);
                return Err(Ok(fail(why)));
            }
            Err(InstallError::Ssh(e)) => {
                // The network or the machine failed under an upload or a command: get the
                // machine back, and count the boot as failed (not the candidate's verdict).
                drop(capture);
                let note = self
                    .recover(&format!("installing {expected_release}: {e}"))
                    .await
                    .map_err(Err)?;
                return Err(Ok(fail(format!("install failed: {e} ({note})"))));
            }
        }
        drop(conn);

        // 4. Wait for the candidate.
        let deadline = reboot_at + Duration::from_secs(self.cfg.boot_timeout_s);
        let (conn, new_boot_id) = match self
            .wait_for_ssh(Some(&old_boot_id), fatal.clone(), deadline)
            .await
        {
            Back::Up(c, id) => (c, id),
            Back::Fatal(line) => {
                let note = self
                    .recover(&format!("{expected_release} failed at boot: {line}"))
                    .await
                    .map_err(Err)?;
                return Err(Ok(fail(format!("boot failed: {line} ({note})"))));
            }
            Back::Timeout(last) => {
                let why = format!(
                    "boot timeout: {expected_release} did not answer SSH within {} s (hosts.boot_timeout_s); last: {last}",
                    self.cfg.boot_timeout_s
                );
                let note = self.recover(&why).await.map_err(Err)?;
                return Err(Ok(fail(format!("{why} ({note})"))));
            }
        };

        // 5. Verify the kernel.
        let release = match conn.check("uname -r", cmd_d).await {
            Ok(r) => r.trim().to_owned(),
            Err(e) => return Err(Ok(fail(format!("reading uname -r: {e}")))),
        };
        if release != expected_release {
            return Err(Ok(fail(format!(
                "wrong kernel: uname -r is {release:?}, expected {expected_release:?}"
            ))));
        }

        // 6. The agent, with a fresh token.
        let token = crate::hosts::session::random_token();
        let agent = format!("{dir}/firstbad-agent");
        let token_file = format!("{dir}/token");
        let scratch = format!("{dir}/scratch");
        let started = async {
            conn.check(&format!("mkdir -p {}", shell_quote(&scratch)), cmd_d)
                .await?;
            stop_agent(&conn, dir, cmd_d).await;
            conn.upload(
                &self.agent_binary,
                &agent,
                0o755,
                upload_deadline(cmd_d, &self.agent_binary),
            )
            .await?;
            conn.upload_bytes(format!("{token}\n").into_bytes(), &token_file, 0o600, cmd_d)
                .await?;
            conn.check(
                &format!(
                    "trap '' HUP; {agent} --listen 0.0.0.0:{port} --token-file {tf} --scratch {sc} >{log} 2>&1 </dev/null & echo $! >{pid}",
                    agent = shell_quote(&agent),
                    port = self.cfg.agent_port,
                    tf = shell_quote(&token_file),
                    sc = shell_quote(&scratch),
                    log = shell_quote(&format!("{dir}/agent.log")),
                    pid = shell_quote(&format!("{dir}/agent.pid")),
                ),
                cmd_d,
            )
            .await
        }
        .await;
        if let Err(e) = started {
            return Err(Ok(fail(format!("starting the agent: {e}"))));
        }
        let client = AgentClient::new(self.cfg.agent_url.clone(), token);
        let identity = loop {
            if let Some(line) = fatal.borrow().clone() {
                return Err(Ok(fail(format!("kernel failed: {line}"))));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Ok(fail(format!(
                    "boot timeout: no healthy agent at {} within {} s (hosts.boot_timeout_s)",
                    self.cfg.agent_url, self.cfg.boot_timeout_s
                ))));
            }
            match tokio::time::timeout(left.min(Duration::from_secs(5)), client.identity()).await
            {
                Ok(Ok(id)) => break id,
                Ok(Err(AgentError::Status { status: 401, .. })) => {
                    return Err(Err(HostError::Agent {
                        host: self.name.clone(),
                        why: format!(
                            "the agent at {} refused this boot's token (HTTP 401): another agent answers there; check hosts.agent_url and agent_port",
                            self.cfg.agent_url
                        ),
                    }))
                }
                _ => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        };
        if identity.kernel_release != expected_release || identity.boot_id != new_boot_id {
            return Err(Err(HostError::Agent {
                host: self.name.clone(),
                why: format!(
                    "the agent at {} reports kernel {:?} boot {}, but SSH sees {expected_release:?} boot {new_boot_id}: hosts.agent_url reaches another machine",
                    self.cfg.agent_url, identity.kernel_release, identity.boot_id
                ),
            }));
        }
        Ok(Session {
            client,
            identity,
            boot_seconds: reboot_at.elapsed().as_secs_f64(),
            console: console.to_owned(),
            fatal,
            capture,
            host: SshHost::new(&self.name, &self.cfg, &self.agent_binary, &self.work),
        })
    }

    /// The host did not answer before the install: power-cycle, then use it.
    async fn reach_after_recovery(&self, why: &str) -> BootResult<(Conn, String)> {
        let why = format!("unreachable before the install: {why}");
        self.recover(&why).await.map_err(Err)?;
        let d = self.command_deadline();
        let c = self
            .connect(d)
            .await
            .map_err(|e| Err(self.needs_person(format!("{why}; after a power cycle: {e}"))))?;
        let id = c
            .check(BOOT_ID, d)
            .await
            .map_err(|e| Err(self.needs_person(format!("{why}; after a power cycle: {e}"))))?;
        Ok((c, id.trim().to_owned()))
    }
}
const BOOT_ID: &str = "cat /proc/sys/kernel/random/boot_id";

async fn stop_agent(conn: &Conn, dir: &str, d: Duration) {
    let pid = shell_quote(&format!("{dir}/agent.pid"));
    let _ = conn
        .exec(
            &format!("[ -f {pid} ] && kill $(cat {pid}) 2>/dev/null; rm -f {pid}; true"),
            d,
        )
        .await;
}

impl Session {
    /// Runs a workload; a fatal console line or a timeout makes it a [`BootFailure`].
    pub async fn run(
        &mut self,
        workload: &Workload,
        timeout: Duration,
    ) -> Result<WorkloadResult, BootFailure> {
        // The console is a command of the lab's (a serial server, IPMI SOL): when it ends, it
        // says nothing about the kernel.
        let closed = crate::hosts::session::Closed::Ignored;
        crate::hosts::session::run_watched(
            &self.client,
            workload,
            timeout,
            &mut self.fatal,
            &self.console,
            closed,
        )
        .await
    }

    /// Stops the agent (best effort, bounded) and the console capture.
    pub async fn shutdown(mut self) {
        let d = self.host.command_deadline();
        if let Ok(c) = self.host.connect(d).await {
            stop_agent(&c, &self.host.cfg.remote_dir, d).await;
        }
        if let Some(mut c) = self.capture.take() {
            let _ = c.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), c.wait()).await;
        }
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HostError {
    let what = what.into();
    move |source| HostError::Io { what, source }
}
