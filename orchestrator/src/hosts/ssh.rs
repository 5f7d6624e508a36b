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

use super::ssh_conn::{fill_placeholders, shell_quote, Conn, SshError};
use super::{BootFailure, HostError};
use crate::agent_client::{AgentClient, AgentError};
use crate::config::{Install, SshConfig};
use firstbad_wire::{Identity, Workload, WorkloadResult};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
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
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = fatal.changed() => {}
            }
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
            Err(Install_::Candidate(why)) => {
                drop(capture);
                return Err(Ok(fail(why)));
            }
            Err(Install_::Ssh(e)) => {
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
        let token = random_token();
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

    async fn install(
        &self,
        conn: &Conn,
        image: &Path,
        remote_image: &str,
        release: &str,
    ) -> Result<(), Install_> {
        let d = self.command_deadline();
        let dir = &self.cfg.remote_dir;
        conn.check(&format!("mkdir -p {}", shell_quote(dir)), d)
            .await?;
        conn.upload(image, remote_image, 0o644, upload_deadline(d, image))
            .await?;
        // Modules, when the build made any: a tarball of lib/modules/<release>. The old
        // directory of that release goes first, so that no stale module of an earlier build
        // of the same release survives; the tarball goes after it is unpacked.
        let modules = image.with_file_name(crate::build::MODULES_TAR);
        if modules.is_file() {
            // The release names the directory removed below: never empty, never a path.
            if release.is_empty() || release.contains('/') || release.starts_with('.') {
                return Err(Install_::Candidate(format!(
                    "kernel release {release:?} cannot name a directory under /lib/modules"
                )));
            }
            let remote = format!("{dir}/modules-{release}.tar");
            conn.upload(&modules, &remote, 0o644, upload_deadline(d, &modules))
                .await?;
            candidate(
                conn.exec(
                    &format!(
                        "rm -rf {lib} && tar -C / -xf {tar} && rm -f {tar}",
                        lib = shell_quote(&format!("/lib/modules/{release}")),
                        tar = shell_quote(&remote)
                    ),
                    d,
                )
                .await?,
                "unpacking the modules",
            )?;
        }
        let initrd = "";
        let reboot = match &self.cfg.install {
            Install::Kexec { cmdline } => {
                let cmdline = match cmdline {
                    Some(c) => shell_quote(&fill_placeholders(c, remote_image, release, initrd)),
                    // The running kernel's line, so the candidate boots the same root.
                    None => "\"$(cat /proc/cmdline)\"".to_owned(),
                };
                candidate(
                    conn.exec(
                        &format!(
                            "kexec -l {} --command-line={cmdline}",
                            shell_quote(remote_image)
                        ),
                        d,
                    )
                    .await?,
                    "kexec -l",
                )?;
                "kexec -e".to_owned()
            }
            Install::GrubReboot { entry } => {
                candidate(
                    conn.exec(&grub_reboot_command(entry, remote_image, release), d)
                        .await?,
                    "grub-reboot",
                )?;
                "reboot".to_owned()
            }
            Install::Commands { commands, reboot } => {
                for c in commands {
                    let c = fill_placeholders(c, remote_image, release, initrd);
                    candidate(conn.exec(&c, d).await?, &c)?;
                }
                reboot.clone()
            }
        };
        // Detached, after a second: the SSH command returns before the machine goes down.
        // `trap '' HUP` rather than nohup, which busybox machines may lack (the lab VM's
        // busybox has none: the test caught it).
        conn.check(
            &format!(
                "sh -c {} >/dev/null 2>&1 </dev/null &",
                shell_quote(&format!("trap '' HUP; sleep 1; sync; {reboot}"))
            ),
            d,
        )
        .await?;
        Ok(())
    }
}

/// The `install = "grub-reboot"` command: copy the image to `/boot/vmlinuz-<release>`, let
/// the distribution's `update-grub` write its menu entry, and name that entry for the next
/// boot only.
///
/// The entry is one argument of `grub-reboot`, quoted as a whole after `{release}` and
/// `{image}` are put in: a title holds spaces and `>` (the submenu separator), which an
/// unquoted shell word would split and redirect (`Advanced options … >Debian …` wrote a file
/// named `Debian` before the lab VM test caught it).
fn grub_reboot_command(entry: &str, remote_image: &str, release: &str) -> String {
    let boot_image = format!("/boot/vmlinuz-{release}");
    let entry = entry
        .replace("{release}", release)
        .replace("{image}", &boot_image)
        .replace("{initrd}", "");
    format!(
        "cp {} {} && update-grub && grub-reboot {}",
        shell_quote(remote_image),
        shell_quote(&boot_image),
        shell_quote(&entry)
    )
}

/// An install step's failure: the candidate's (a command refused it) or the link's.
enum Install_ {
    Candidate(String),
    Ssh(SshError),
}

impl From<SshError> for Install_ {
    fn from(e: SshError) -> Self {
        Install_::Ssh(e)
    }
}

fn candidate(out: super::ssh_conn::Output, what: &str) -> Result<(), Install_> {
    if out.status == 0 {
        Ok(())
    } else {
        Err(Install_::Candidate(format!(
            "{what} failed (exit {}): {}",
            out.status,
            out.output.trim()
        )))
    }
}

const BOOT_ID: &str = "cat /proc/sys/kernel/random/boot_id";

/// A command deadline plus 1 s per MiB: a slow lab link is not a dead one.
fn upload_deadline(d: Duration, file: &Path) -> Duration {
    let mib = std::fs::metadata(file).map(|m| m.len() >> 20).unwrap_or(0);
    d + Duration::from_secs(mib)
}

async fn stop_agent(conn: &Conn, dir: &str, d: Duration) {
    let pid = shell_quote(&format!("{dir}/agent.pid"));
    let _ = conn
        .exec(
            &format!("[ -f {pid} ] && kill $(cat {pid}) 2>/dev/null; rm -f {pid}; true"),
            d,
        )
        .await;
}

/// Starts the console command (if any), copying its output to `log` and reporting the first
/// line that fails the boot.
async fn start_console(
    cmd: Option<&str>,
    log: &Path,
) -> Result<
    (
        Option<tokio::process::Child>,
        watch::Receiver<Option<String>>,
    ),
    HostError,
> {
    let (tx, rx) = watch::channel(None);
    let mut file = tokio::fs::File::create(log)
        .await
        .map_err(io(format!("creating {}", log.display())))?;
    let Some(cmd) = cmd else {
        let _ = file
            .write_all(b"[firstbad] no console command configured (hosts.console)\n")
            .await;
        // Keep the sender alive so that the receiver never reports a closed console.
        std::mem::forget(tx);
        return Ok((None, rx));
    };
    let mut c = tokio::process::Command::new("sh");
    c.args(["-c", cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: prctl in the child before exec; async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = c
        .spawn()
        .map_err(io(format!("starting the console command `{cmd}`")))?;
    let out = child.stdout.take().expect("stdout is piped");
    let err = child.stderr.take().expect("stderr is piped");
    tokio::spawn(async move {
        let tx = super::copy_console(out, err, "console command", file, tx).await;
        // The console command ended; a closed console is not a failed kernel.
        std::mem::forget(tx);
    });
    Ok((Some(child), rx))
}

impl Session {
    /// Runs a workload; a fatal console line or a timeout makes it a [`BootFailure`].
    pub async fn run(
        &mut self,
        workload: &Workload,
        timeout: Duration,
    ) -> Result<WorkloadResult, BootFailure> {
        let fail = |reason: String| BootFailure {
            reason,
            console: self.console.clone(),
        };
        let client = self.client.clone();
        let run = client.run(workload, timeout);
        tokio::pin!(run);
        loop {
            tokio::select! {
                r = &mut run => return r.map_err(|e| fail(format!("workload failed: {e}"))),
                changed = self.fatal.changed() => {
                    if changed.is_err() {
                        continue;
                    }
                    if let Some(line) = self.fatal.borrow().clone() {
                        return Err(fail(format!("kernel failed during the workload: {line}")));
                    }
                }
            }
        }
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

fn random_token() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..32)
        .map(|_| format!("{:x}", rng.gen::<u8>() & 0xf))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented Debian entry reaches `grub-reboot` as one argument, through a real shell.
    #[test]
    fn the_grub_entry_is_one_argument_of_grub_reboot() {
        use std::os::unix::fs::PermissionsExt;
        let cmd = grub_reboot_command(
            "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux {release}",
            "/var/tmp/first bad's dir/vmlinuz-6.1.192-fbabc",
            "6.1.192-fbabc",
        );
        // Stand-ins for the three tools, first on $PATH: they print what they were given.
        let bin = tempfile::tempdir().expect("a temp dir");
        for (tool, body) in [
            ("cp", r#"printf 'cp %s|%s\n' "$1" "$2""#),
            ("update-grub", "true"),
            ("grub-reboot", r#"printf '%s args: %s\n' "$#" "$1""#),
        ] {
            let p = bin.path().join(tool);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("writable");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let cwd = tempfile::tempdir().expect("a temp dir");
        let path = format!(
            "{}:{}",
            bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .env("PATH", path)
            .current_dir(cwd.path())
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "cp /var/tmp/first bad's dir/vmlinuz-6.1.192-fbabc|/boot/vmlinuz-6.1.192-fbabc\n\
             1 args: Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.1.192-fbabc\n"
        );
        // No `>` redirection happened: the working directory is still empty.
        assert_eq!(std::fs::read_dir(cwd.path()).expect("readable").count(), 0);
    }
}
