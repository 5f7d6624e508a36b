//! Test hosts: where a candidate kernel boots and the agent measures it.
//!
//! A host either yields a booted, verified machine with a running agent, or a
//! [`BootFailure`]: a reason and the console log, which the hunt records as a failed boot
//! and never as a verdict. [`Host`] is the one type the hunt uses; it dispatches to the
//! kinds: [`qemu`] (a local VM) and [`ssh`] (a lab machine).

pub mod cpio;
pub mod lava;
pub mod machine;
pub mod modules;
pub mod qemu;
pub mod session;
pub mod ssh;
pub mod ssh_conn;

use crate::config::{HostConfig, HostKind};
use firstbad_wire::{Identity, Workload, WorkloadResult};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A boot that did not give a verified, working test machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootFailure {
    /// Why, for a person: `kernel panic: <line>`, `boot timeout after 180 s`,
    /// `wrong kernel: booted X, expected Y`.
    pub reason: String,
    /// The console log of that boot.
    pub console: PathBuf,
}

pub use crate::error::HostError;

/// Console lines that end a boot as failed. A WARNING is not among them: it does not stop
/// the machine, and a regression hunt must not skip a commit for a harmless warning.
pub const FATAL_CONSOLE_MARKERS: &[&str] = &[
    "Kernel panic - not syncing",
    "BUG: ",
    "Oops: ",
    "general protection fault",
    "INFO: task hung",
    // The hung-task detector's real words: "INFO: task jbd2/vda-8:97 blocked for more than
    // 120 seconds." (kernel/hung_task.c).
    " blocked for more than ",
    "firstbad-init: FAILED",
];

/// The first fatal marker in a console line, if any.
pub fn fatal_marker(line: &str) -> Option<&'static str> {
    FATAL_CONSOLE_MARKERS
        .iter()
        .copied()
        .find(|m| line.contains(m))
}

/// The hunt's value of a boot's workload `result`: its `metric`, when the agent computed it
/// and the statistics can compare it; else why not, the reason of a failed boot, never a
/// value (issue 19, finding 4: a metric the agent could not compute; issue 32, finding 3: a
/// value at or below zero).
pub fn metric_value(result: &WorkloadResult, metric: &str) -> Result<f64, String> {
    match result.metrics.get(metric) {
        Some(&value) => crate::sequential::comparable(metric, value).map_err(|e| e.to_string()),
        None => Err(match result.unavailable.get(metric) {
            Some(why) => format!("the workload could not give {metric}: {why}"),
            None => format!("the workload reported no {metric} metric"),
        }),
    }
}

/// The kernel's boot banner; a second one in one boot's console is a silent reboot.
pub const BANNER: &str = "Linux version ";

/// Reads one boot's console of a real machine line by line: a fatal marker, or a second
/// kernel banner (the machine rebooted on its own: a panic with `panic=N`, a watchdog, a
/// triple fault that printed nothing), fails the boot.
#[derive(Debug, Default)]
pub struct ConsoleScanner {
    banners: u32,
}

impl ConsoleScanner {
    /// The reason this line fails the boot, if it does.
    pub fn line(&mut self, line: &str) -> Option<String> {
        if let Some(m) = fatal_marker(line) {
            return Some(format!("{m}: {}", line.trim()));
        }
        if line.contains(BANNER) {
            self.banners += 1;
            if self.banners > 1 {
                return Some(format!(
                    "the machine rebooted on its own (a second kernel banner): {}",
                    line.trim()
                ));
            }
        }
        None
    }
}

/// Copies one boot's console to its log: the kernel's lines from `console`, and the messages of
/// what carries them (qemu's stderr, a console command's stderr) from `carrier`, tagged
/// `[tag]`. The first console line that fails the boot ([`ConsoleScanner`]) is sent on `fatal`;
/// carrier lines are logged, not scanned. Returns `fatal` when both streams have closed, so
/// that the caller decides whether a closed console means anything (qemu: the VM is gone;
/// a console command: nothing about the kernel).
pub async fn copy_console(
    console: impl tokio::io::AsyncRead + Unpin,
    carrier: impl tokio::io::AsyncRead + Unpin,
    tag: &str,
    mut log: tokio::fs::File,
    fatal: tokio::sync::watch::Sender<Option<String>>,
) -> tokio::sync::watch::Sender<Option<String>> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut scanner = ConsoleScanner::default();
    let mut out = tokio::io::BufReader::new(console).split(b'\n');
    let mut err = tokio::io::BufReader::new(carrier).split(b'\n');
    let (mut out_open, mut err_open) = (true, true);
    while out_open || err_open {
        let (line, from_carrier) = tokio::select! {
            l = out.next_segment(), if out_open => match l {
                Ok(Some(l)) => (l, false),
                _ => { out_open = false; continue; }
            },
            l = err.next_segment(), if err_open => match l {
                Ok(Some(l)) => (l, true),
                _ => { err_open = false; continue; }
            },
        };
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\r');
        let text = if from_carrier {
            format!("[{tag}] {text}")
        } else {
            text.to_owned()
        };
        let _ = log.write_all(text.as_bytes()).await;
        let _ = log.write_all(b"\n").await;
        if fatal.borrow().is_none() && !from_carrier {
            if let Some(reason) = scanner.line(&text) {
                let _ = log.flush().await;
                fatal.send_replace(Some(reason));
            }
        }
    }
    let _ = log.flush().await;
    fatal
}

/// A configured test host of any kind.
pub enum Host {
    /// A local qemu VM.
    Qemu(Box<qemu::QemuHost>),
    /// A machine reached over SSH.
    Ssh(Box<ssh::SshHost>),
    /// A LAVA farm: several boots at once, each a job ([`lava::Farm`]).
    Lava(std::sync::Arc<lava::LavaHost>),
}

/// A booted, verified test machine with its agent.
pub enum Session {
    /// On a qemu host.
    Qemu(Box<qemu::Session>),
    /// On an ssh host.
    Ssh(Box<ssh::Session>),
}

impl Host {
    /// The host described by `cfg`, keeping its per-boot files under `work`.
    pub fn new(cfg: &HostConfig, agent_binary: &Path, work: &Path) -> Host {
        match &cfg.kind {
            HostKind::Qemu(q) => Host::Qemu(Box::new(qemu::QemuHost::new(
                &cfg.name,
                q,
                agent_binary,
                work,
            ))),
            HostKind::Ssh(s) => Host::Ssh(Box::new(ssh::SshHost::new(
                &cfg.name,
                s,
                agent_binary,
                work,
            ))),
            HostKind::Lava(l) => Host::Lava(std::sync::Arc::new(lava::LavaHost::new(
                &cfg.name,
                l,
                agent_binary,
                work,
            ))),
        }
    }

    /// The host's name.
    pub fn name(&self) -> &str {
        match self {
            Host::Qemu(h) => h.name(),
            Host::Ssh(h) => h.name(),
            Host::Lava(h) => h.name(),
        }
    }

    /// Checks, before a hunt, what can be checked without booting.
    pub fn preflight(&self) -> Result<(), HostError> {
        match self {
            Host::Qemu(h) => h.preflight(),
            Host::Ssh(h) => h.preflight(),
            Host::Lava(h) => h.preflight(),
        }
    }

    /// Boots `image` and waits for a healthy agent that reports `expected_release`.
    ///
    /// `Err(Ok(failure))` is the candidate's failure (a skip, never a verdict);
    /// `Err(Err(e))` is the host's, and stops the hunt.
    pub async fn boot(
        &mut self,
        image: &Path,
        expected_release: &str,
        console: &Path,
    ) -> Result<Session, Result<BootFailure, HostError>> {
        match self {
            Host::Qemu(h) => h
                .boot(image, expected_release, console)
                .await
                .map(|s| Session::Qemu(Box::new(s))),
            Host::Ssh(h) => h
                .boot(image, expected_release, console)
                .await
                .map(|s| Session::Ssh(Box::new(s))),
            Host::Lava(h) => Err(Err(HostError::Missing(format!(
                "host {}: a farm's boots are jobs (lava::Farm), not sessions: a bug in firstbad",
                h.name()
            )))),
        }
    }
}

/// The hunt's hosts, used at once: a batch of boots goes one to a host (the hunt decides
/// which). A host that fails with a host error (it needs a person, its agent is not ours)
/// leaves the pool; the hunt journals that, says so, and goes on with the others.
pub struct HostPool {
    hosts: Vec<Host>,
}

impl HostPool {
    /// A pool of at least one host.
    pub fn new(hosts: Vec<Host>) -> HostPool {
        assert!(!hosts.is_empty(), "the config validates at least one host");
        HostPool { hosts }
    }

    /// How many hosts are in the pool: how many boots can run at once.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Never true: a pool keeps its last host.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// The hosts, in config order.
    pub fn hosts_mut(&mut self) -> &mut [Host] {
        &mut self.hosts
    }

    /// The names of the hosts still in the pool.
    pub fn names(&self) -> Vec<&str> {
        self.hosts.iter().map(Host::name).collect()
    }

    /// Takes the named host out of the pool and returns true, unless it is the last one (then
    /// it stays, and its error must stop the hunt) or not in the pool.
    pub fn retire(&mut self, name: &str) -> bool {
        match self.hosts.iter().position(|h| h.name() == name) {
            Some(i) if self.hosts.len() > 1 => {
                self.hosts.remove(i);
                true
            }
            _ => false,
        }
    }
}

impl Session {
    /// What the agent reported.
    pub fn identity(&self) -> &Identity {
        match self {
            Session::Qemu(s) => &s.identity,
            Session::Ssh(s) => &s.identity,
        }
    }

    /// Seconds from the start of the boot to a healthy agent.
    pub fn boot_seconds(&self) -> f64 {
        match self {
            Session::Qemu(s) => s.boot_seconds,
            Session::Ssh(s) => s.boot_seconds,
        }
    }

    /// Runs a workload; a fatal console line or a timeout makes it a [`BootFailure`].
    pub async fn run(
        &mut self,
        workload: &Workload,
        timeout: Duration,
    ) -> Result<WorkloadResult, BootFailure> {
        match self {
            Session::Qemu(s) => s.run(workload, timeout).await,
            Session::Ssh(s) => s.run(workload, timeout).await,
        }
    }

    /// Ends the session (stops the VM, or the agent on the machine).
    pub async fn shutdown(self) {
        match self {
            Session::Qemu(s) => s.shutdown().await,
            Session::Ssh(s) => s.shutdown().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_and_oopses_are_fatal_but_warnings_are_not() {
        assert!(
            fatal_marker("[    1.23] Kernel panic - not syncing: VFS: Unable to mount").is_some()
        );
        assert!(fatal_marker("[    2.00] BUG: kernel NULL pointer dereference").is_some());
        assert!(fatal_marker("[    2.00] WARNING: CPU: 0 PID: 1 at fs/ext4/inode.c").is_none());
    }

    #[test]
    fn a_host_with_a_host_error_leaves_the_pool_unless_it_is_the_last() {
        let q = crate::config::QemuConfig {
            memory_mb: 256,
            cpus: 1,
            accel: crate::config::Accel::Tcg,
            boot_timeout_s: 10,
            scratch_mb: 64,
            extra_cmdline: String::new(),
            disk: crate::config::disk::DiskModel::page_cache(),
        };
        let host = |name: &str| {
            Host::new(
                &HostConfig {
                    name: name.into(),
                    kind: HostKind::Qemu(q.clone()),
                },
                Path::new("/nonexistent"),
                Path::new("/tmp"),
            )
        };
        let mut pool = HostPool::new(vec![host("lab1"), host("lab2"), host("lab3")]);
        assert_eq!(pool.len(), 3);
        assert!(pool.retire("lab2"));
        assert_eq!(pool.names(), ["lab1", "lab3"]);
        assert!(
            !pool.retire("lab2"),
            "a host not in the pool is not retired twice"
        );
        assert!(pool.retire("lab1"));
        assert!(
            !pool.retire("lab3"),
            "the last host stays, and its error stops the hunt"
        );
        assert_eq!(pool.names(), ["lab3"]);
    }

    #[test]
    fn a_second_banner_is_a_silent_reboot() {
        let mut s = ConsoleScanner::default();
        assert!(s
            .line("[    0.000000] Linux version 6.1.192-fbabc (gcc) #1")
            .is_none());
        assert!(s.line("[    1.0] random: crng init done").is_none());
        assert!(s
            .line("[    9.0] WARNING: CPU: 0 PID: 1 at mm/x.c")
            .is_none());
        let r = s
            .line("[    0.000000] Linux version 6.1.192-fbdef (gcc) #1")
            .expect("a second banner fails the boot");
        assert!(r.contains("rebooted on its own"), "{r}");
        let mut s = ConsoleScanner::default();
        assert!(s
            .line("[  241.1] INFO: task jbd2/vda-8:97 blocked for more than 120 seconds.")
            .is_some());
    }
}
