//! The embedded qemu test host.
//!
//! For every boot firstbad assembles an initramfs (Debian's busybox-static, the static
//! agent, [`INIT`], a fresh token), formats an ext4 scratch disk, and starts qemu with the
//! candidate's bzImage, the serial console on a pipe that is copied to the boot's console log
//! and scanned for panics, and user-mode networking with only the agent's port forwarded, on
//! 127.0.0.1. KVM is used only when a probe with a timeout shows it works; TCG otherwise.

use super::cpio::Archive;
use super::BootFailure;
use crate::agent_client::{AgentClient, AgentError};
use crate::config::{Accel, QemuConfig};
use firstbad_wire::{Identity, Workload, WorkloadResult, GUEST_AGENT_PORT};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The guest's /init (busybox sh): mounts, network, scratch disk, then the agent.
pub const INIT: &str = include_str!("../../assets/init");

/// Where Debian's busybox-static installs its binary.
pub const BUSYBOX: &str = "/bin/busybox";

/// The qemu binary.
const QEMU: &str = "qemu-system-x86_64";

pub use super::HostError;

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HostError {
    let what = what.into();
    move |source| HostError::Io { what, source }
}

/// A local qemu host.
pub struct QemuHost {
    name: String,
    cfg: QemuConfig,
    agent_binary: PathBuf,
    work: PathBuf,
    base_initramfs: Option<Vec<u8>>,
    /// The last kernel's modules archive ([`modules_archive`]), by image: a hunt boots one
    /// kernel many times in a row.
    modules: Option<(PathBuf, Vec<u8>)>,
    kvm: Option<bool>,
}

/// A booted, verified guest with its agent; the VM is killed when this is dropped.
pub struct Session {
    child: tokio::process::Child,
    client: AgentClient,
    /// What the agent reported.
    pub identity: Identity,
    /// Seconds from qemu start to a healthy agent.
    pub boot_seconds: f64,
    console: PathBuf,
    fatal: watch::Receiver<Option<String>>,
}

impl QemuHost {
    /// A qemu host that keeps its per-boot files under `work`.
    pub fn new(name: &str, cfg: &QemuConfig, agent_binary: &Path, work: &Path) -> QemuHost {
        QemuHost {
            name: name.to_owned(),
            cfg: cfg.clone(),
            agent_binary: agent_binary.to_owned(),
            work: work.to_owned(),
            base_initramfs: None,
            modules: None,
            kvm: None,
        }
    }

    /// The host's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Checks that qemu, busybox and mkfs.ext4 are installed and the agent binary exists.
    pub fn preflight(&self) -> Result<(), HostError> {
        for (tool, pkg) in [(QEMU, "qemu-system-x86"), ("mkfs.ext4", "e2fsprogs")] {
            if which(tool).is_none() {
                return Err(HostError::Missing(format!(
                    "{tool} is not installed: apt install {pkg}"
                )));
            }
        }
        if !Path::new(BUSYBOX).is_file() {
            return Err(HostError::Missing(format!(
                "{BUSYBOX} is missing: apt install busybox-static"
            )));
        }
        if !self.agent_binary.is_file() {
            return Err(HostError::Missing(format!(
                "agent binary {} is missing: run scripts/build-agent, or set FIRSTBAD_AGENT",
                self.agent_binary.display()
            )));
        }
        Ok(())
    }

    fn base_initramfs(&mut self) -> Result<Vec<u8>, HostError> {
        if let Some(b) = &self.base_initramfs {
            return Ok(b.clone());
        }
        let bytes = base_initramfs(&self.agent_binary)?;
        self.base_initramfs = Some(bytes.clone());
        Ok(bytes)
    }

    async fn use_kvm(&mut self, image: &Path) -> bool {
        match self.cfg.accel {
            Accel::Kvm => true,
            Accel::Tcg => false,
            Accel::Auto => {
                if let Some(k) = self.kvm {
                    return k;
                }
                let k = probe_kvm(image).await;
                tracing::info!(host = %self.name, "KVM {}", if k { "works: using it" } else { "does not work here: using TCG" });
                self.kvm = Some(k);
                k
            }
        }
    }

    /// Boots `image` and waits for a healthy agent that reports `expected_release`.
    ///
    /// `Err(Ok(failure))` is the candidate's failure (panic, timeout, wrong kernel);
    /// `Err(Err(e))` is the host's.
    pub async fn boot(
        &mut self,
        image: &Path,
        expected_release: &str,
        console: &Path,
    ) -> Result<Session, Result<BootFailure, HostError>> {
        let fail = |reason: String| {
            Err(Ok(BootFailure {
                reason,
                console: console.to_owned(),
            }))
        };
        std::fs::create_dir_all(&self.work)
            .map_err(io(format!("creating {}", self.work.display())))
            .map_err(Err)?;
        if let Some(parent) = console.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io("creating the console log directory"))
                .map_err(Err)?;
        }
        let token = super::session::random_token();
        let mut initramfs = self.base_initramfs().map_err(Err)?;
        let mut extra = Archive::new();
        extra.file("etc/firstbad/token", 0o600, format!("{token}\n").as_bytes());
        initramfs.extend_from_slice(&extra.finish());
        if self.modules.as_ref().is_none_or(|(i, _)| i != image) {
            let archive = modules_archive(image, expected_release).map_err(Err)?;
            self.modules = Some((image.to_owned(), archive));
        }
        if let Some((_, archive)) = &self.modules {
            initramfs.extend_from_slice(archive);
        }
        let initrd = self.work.join("initramfs.cpio");
        std::fs::write(&initrd, &initramfs)
            .map_err(io("writing the initramfs"))
            .map_err(Err)?;
        let scratch = self.work.join("scratch.img");
        make_scratch(&scratch, self.cfg.scratch_mb)
            .await
            .map_err(Err)?;
        let kvm = self.use_kvm(image).await;

        let port = free_port().map_err(Err)?;
        let mut cmd = tokio::process::Command::new(QEMU);
        if kvm {
            cmd.args(["-accel", "kvm", "-cpu", "host"]);
        } else {
            cmd.args(["-accel", "tcg"]);
        }
        cmd.args(["-m", &self.cfg.memory_mb.to_string()])
            .args(["-smp", &self.cfg.cpus.to_string()])
            .args(["-nodefaults", "-display", "none", "-no-reboot"])
            .args(["-serial", "stdio", "-monitor", "none"])
            // A guest panic makes qemu exit 1 (CONFIG_PVPANIC_PCI in configs/kernel), so a
            // panic is told apart from a clean poweroff even without its console line.
            .args(["-device", "pvpanic-pci", "-action", "panic=exit-failure"])
            .arg("-kernel")
            .arg(image)
            .arg("-initrd")
            .arg(&initrd)
            .arg("-append")
            .arg(format!(
                // panic=-1 with -no-reboot: a panic ends qemu at once. oops=panic: an oops
                // must not leave a half-dead kernel measuring.
                "console=ttyS0 panic=-1 oops=panic {}",
                self.cfg.extra_cmdline
            ))
            .args(crate::config::disk::qemu_args(&self.cfg.disk, &scratch))
            .arg("-nic")
            .arg(format!(
                "user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:{GUEST_AGENT_PORT}"
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // SAFETY: prctl in the child before exec; async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                // If firstbad dies (even by SIGKILL), its VM dies with it.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(io("starting qemu")).map_err(Err)?;
        let (fatal_tx, fatal_rx) = watch::channel(None);
        let log = tokio::fs::File::create(console)
            .await
            .map_err(io(format!("creating {}", console.display())))
            .map_err(Err)?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        // When qemu exits both streams close and the sender is dropped: a closed console
        // means the VM is gone.
        tokio::spawn(super::copy_console(stdout, stderr, "qemu", log, fatal_tx));

        let client = AgentClient::new(format!("http://127.0.0.1:{port}"), token);
        let deadline = started + Duration::from_secs(self.cfg.boot_timeout_s);
        let mut fatal = fatal_rx.clone();
        let identity = loop {
            if let Some(line) = fatal.borrow_and_update().clone() {
                return fail(format!("boot failed: {line}"));
            }
            if let Ok(Some(status)) = child.try_wait() {
                // Let the console copier drain the last lines.
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Some(line) = fatal.borrow().clone() {
                    return fail(format!("boot failed: {line}"));
                }
                return fail(format!("qemu exited ({status}) before the agent answered"));
            }
            if Instant::now() >= deadline {
                return fail(format!(
                    "boot timeout: no agent after {} s (hosts.boot_timeout_s)",
                    self.cfg.boot_timeout_s
                ));
            }
            // qemu accepts on the forwarded port before the guest listens, so a call can hang
            // until the agent is up: bound each call by the boot deadline.
            let left = deadline.saturating_duration_since(Instant::now());
            let answer =
                tokio::time::timeout(left.min(Duration::from_secs(5)), client.identity()).await;
            let Ok(answer) = answer else { continue };
            match answer {
                Ok(id) => break id,
                Err(AgentError::Status { status: 401, .. }) => {
                    return Err(Err(HostError::Missing(
                        "the agent refused this boot's token (HTTP 401): is another agent on the port?"
                            .into(),
                    )))
                }
                Err(_) => super::session::pause(&mut fatal, Duration::from_millis(500)).await,
            }
        };
        if identity.kernel_release != expected_release {
            return fail(format!(
                "wrong kernel: the agent reports {:?}, expected {expected_release:?}",
                identity.kernel_release
            ));
        }
        Ok(Session {
            child,
            client,
            identity,
            boot_seconds: started.elapsed().as_secs_f64(),
            console: console.to_owned(),
            fatal: fatal_rx,
        })
    }
}

impl Session {
    /// Runs a workload; a panic on the console or a timeout makes it a [`BootFailure`].
    pub async fn run(
        &mut self,
        workload: &Workload,
        timeout: Duration,
    ) -> Result<WorkloadResult, BootFailure> {
        // The console is qemu's stdout: closed, the VM is gone.
        let closed = super::session::Closed::Fails("qemu exited during the workload");
        super::session::run_watched(
            &self.client,
            workload,
            timeout,
            &mut self.fatal,
            &self.console,
            closed,
        )
        .await
    }

    /// Stops the VM.
    pub async fn shutdown(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// The initramfs every boot starts from ([`INIT`], busybox, the static agent); a boot
/// appends its token (and, on a farm, its workload) as a second archive.
pub(super) fn base_initramfs(agent_binary: &Path) -> Result<Vec<u8>, HostError> {
    let busybox = std::fs::read(BUSYBOX).map_err(io(format!("reading {BUSYBOX}")))?;
    let agent =
        std::fs::read(agent_binary).map_err(io(format!("reading {}", agent_binary.display())))?;
    let mut a = Archive::new();
    for d in [
        "bin",
        "dev",
        "etc",
        "etc/firstbad",
        "proc",
        "sys",
        "tmp",
        "run",
        "scratch",
    ] {
        a.dir(d);
    }
    a.dir("usr").dir("usr/bin");
    // The kernel opens /dev/console before /init runs; without the node, init has no stdio.
    a.char_dev("dev/console", 0o600, 5, 1)
        .file("bin/busybox", 0o755, &busybox)
        .symlink("bin/sh", "busybox")
        .file("init", 0o755, INIT.as_bytes())
        .file("usr/bin/firstbad-agent", 0o755, &agent);
    Ok(a.finish())
}

/// The modules a prebuilt kernel needs in the guest ([`super::modules`]), as an archive to
/// append to the initramfs: `lib/modules/<release>/<name>.ko` and `/etc/firstbad/modules`,
/// the load order. Empty for a kernel without a modules tree (everything built in).
pub(super) fn modules_archive(image: &Path, release: &str) -> Result<Vec<u8>, HostError> {
    let Some(tree) = super::modules::find_tree(image, release) else {
        return Ok(Vec::new());
    };
    let modules = super::modules::resolve(&tree, super::modules::GUEST_MODULES)
        .map_err(HostError::Missing)?;
    let dir = format!("lib/modules/{release}");
    let mut a = Archive::new();
    a.dir("lib")
        .dir("lib/modules")
        .dir(&dir)
        .dir("etc")
        .dir("etc/firstbad");
    let mut order = String::new();
    for m in &modules {
        let path = format!("{dir}/{}.ko", m.name);
        a.file(&path, 0o644, &m.bytes);
        order.push_str(&format!("/{path}\n"));
    }
    a.file("etc/firstbad/modules", 0o644, order.as_bytes());
    tracing::debug!(
        "initramfs modules from {}: {}",
        tree.display(),
        modules
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(a.finish())
}

pub(super) async fn make_scratch(path: &Path, mb: u32) -> Result<(), HostError> {
    let _ = std::fs::remove_file(path);
    let f = std::fs::File::create(path).map_err(io(format!("creating {}", path.display())))?;
    f.set_len(u64::from(mb) << 20)
        .map_err(io("sizing the scratch disk"))?;
    drop(f);
    let mkfs = which("mkfs.ext4").ok_or_else(|| {
        HostError::Missing("mkfs.ext4 is not installed: apt install e2fsprogs".into())
    })?;
    let out = tokio::process::Command::new(mkfs)
        .args(["-F", "-q", "-E", "nodiscard"])
        .arg(path)
        .output()
        .await
        .map_err(io("running mkfs.ext4"))?;
    if !out.status.success() {
        return Err(HostError::Missing(format!(
            "mkfs.ext4 {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Does KVM boot this kernel? A real boot attempt of at most 15 s: on these machines
/// /dev/kvm exists but KVM aborts or hangs, so only a boot that prints the kernel banner
/// counts.
async fn probe_kvm(image: &Path) -> bool {
    if std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        return false;
    }
    let child = tokio::process::Command::new(QEMU)
        .args(["-accel", "kvm", "-cpu", "host", "-m", "256"])
        .args([
            "-nodefaults",
            "-display",
            "none",
            "-no-reboot",
            "-serial",
            "stdio",
        ])
        .arg("-kernel")
        .arg(image)
        .args(["-append", "console=ttyS0 panic=-1 init=/firstbad-kvm-probe"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(15), child).await {
        Ok(Ok(out)) => String::from_utf8_lossy(&out.stdout).contains("Linux version"),
        _ => false,
    }
}

fn free_port() -> Result<u16, HostError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("finding a free port"))?;
    Ok(l.local_addr().map_err(io("finding a free port"))?.port())
}

pub(super) fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/sbin", "/usr/sbin"].iter().map(PathBuf::from))
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}
