//! `[[hosts]]`: each host's kind and the fields that kind reads, qemu's, ssh's and LAVA's: the
//! validated types, and their validation from the raw tables.

use super::bounds;
use super::raw::RawHost;
use super::read::snippet;
use super::validate::Validator;
use super::{disk, ssh};
use crate::error::ConfigError;
use std::path::PathBuf;

/// One test host.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Name in logs and the journal.
    pub name: String,
    /// What kind of host it is.
    pub kind: HostKind,
}

/// Host kinds.
#[derive(Debug, Clone)]
pub enum HostKind {
    /// A local qemu VM firstbad boots itself.
    Qemu(QemuConfig),
    /// A machine firstbad reaches over SSH, installs kernels on and reboots.
    Ssh(Box<SshConfig>),
    /// A LAVA farm: each boot is a job its scheduler gives to a free device.
    Lava(Box<LavaConfig>),
}

/// Where a LAVA farm's API token comes from: never the hunt file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LavaToken {
    /// A file holding it (surrounding whitespace ignored), read when the hunt starts.
    File(PathBuf),
    /// An environment variable holding it.
    Env(String),
}

/// A LAVA farm (`kind = "lava"`).
#[derive(Debug, Clone)]
pub struct LavaConfig {
    /// The server, e.g. `http://lava.example.org` (the REST API is under `/api/v0.2/`).
    pub server: String,
    /// The API token's source.
    pub token: LavaToken,
    /// The device type jobs ask for.
    pub device_type: String,
    /// Device tags every job asks for (all of them).
    pub tags: Vec<String>,
    /// Jobs in flight at most: boots the farm runs at once for this hunt.
    pub jobs: u32,
    /// From submission to a finished job; past it firstbad cancels the job and counts a
    /// failed boot (a farm does not end a job whose worker vanished).
    pub job_timeout_s: u64,
    /// How long the server may not answer before the farm is a host error; inside it a
    /// restart of LAVA costs only time.
    pub server_deadline_s: u64,
    /// Size of the ext4 scratch disk each job deploys.
    pub scratch_mb: u32,
    /// Appended to the kernel command line.
    pub extra_cmdline: String,
    /// The URL under which the host's image directory is served to the farm's workers
    /// (`http://controller/firstbad/`); `None`: `file://` paths, for a worker on this machine.
    pub images_url: Option<String>,
}

/// A machine reached over SSH (`kind = "ssh"`).
#[derive(Debug, Clone)]
pub struct SshConfig {
    /// Who and where, with authentication, host key check and keepalive.
    pub target: ssh::SshTarget,
    /// Bound on TCP connect, handshake and authentication.
    pub connect_timeout_s: u64,
    /// Bound on any one remote command (uploads get this plus 1 s per MiB).
    pub command_timeout_s: u64,
    /// From the reboot to a verified machine with a healthy agent.
    pub boot_timeout_s: u64,
    /// How a candidate is installed and booted.
    pub install: Install,
    /// Local shell command that power-cycles the machine (`ipmitool ... chassis power
    /// cycle`, a PDU script); without it a host that does not come back needs a person.
    pub power_cycle: Option<String>,
    /// Local shell command whose output is the machine's console (`ipmitool ... sol
    /// activate`, `virsh console`, a serial server); copied to each boot's console log.
    pub console: Option<String>,
    /// Port the agent listens on, on the machine.
    pub agent_port: u16,
    /// Where firstbad reaches the agent (default `http://<host>:<agent_port>`).
    pub agent_url: String,
    /// Directory on the machine for kernels, the agent and its scratch files.
    pub remote_dir: String,
}

/// How an ssh host installs and boots a candidate. Placeholders `{image}`, `{release}` and
/// `{initrd}` in user text are replaced by shell-quoted values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Install {
    /// `kexec -l` the image with this command line (default: the running kernel's
    /// `/proc/cmdline`), then `kexec -e`.
    Kexec {
        /// The candidate's command line, or `None` for the running one.
        cmdline: Option<String>,
    },
    /// Copy to /boot, `update-grub`, `grub-reboot <entry>` (a one-time entry: a kernel that
    /// does not boot falls back to the default on the next power cycle), `reboot`.
    GrubReboot {
        /// The menu entry, e.g. `Advanced options for Debian GNU/Linux>Debian GNU/Linux,
        /// with Linux {release}`.
        entry: String,
    },
    /// The user's own commands, then the reboot command.
    Commands {
        /// Run in order; any failure fails the boot.
        commands: Vec<String>,
        /// Run in the background after them (default `reboot`).
        reboot: String,
    },
}

/// A local qemu VM.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    /// Guest memory in MiB.
    pub memory_mb: u32,
    /// Guest CPUs.
    pub cpus: u32,
    /// Accelerator choice.
    pub accel: Accel,
    /// From qemu start to a healthy agent; past it the boot is a failure (a skip).
    pub boot_timeout_s: u64,
    /// Size of the ext4 scratch disk the workload writes to.
    pub scratch_mb: u32,
    /// Appended to the kernel command line.
    pub extra_cmdline: String,
    /// How the scratch disk behaves ([`disk::DiskModel`]).
    pub disk: disk::DiskModel,
}

/// qemu accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM when a probe with a timeout shows that it works, TCG otherwise.
    Auto,
    /// Always KVM.
    Kvm,
    /// Always TCG (software emulation).
    Tcg,
}

/// The `[[hosts]]` tables: at least one, each with its own name.
pub(super) fn hosts(v: &Validator, raw: Vec<RawHost>) -> Result<Vec<HostConfig>, ConfigError> {
    if raw.is_empty() {
        return Err(v.field(
            "hosts",
            "no test host: add a [[hosts]] table, e.g. kind = \"qemu\"",
        ));
    }
    let mut hosts = Vec::new();
    for (i, h) in raw.into_iter().enumerate() {
        let at = |f: &str| format!("hosts[{i}].{f}");
        let kind = match h.kind.as_str() {
            "qemu" => {
                let accel = match h.accel.as_deref().unwrap_or("auto") {
                    "auto" => Accel::Auto,
                    "kvm" => Accel::Kvm,
                    "tcg" => Accel::Tcg,
                    other => {
                        return Err(v.field(
                            &at("accel"),
                            format!(
                                "{} is not one of \"auto\", \"kvm\", \"tcg\"",
                                snippet(other)
                            ),
                        ))
                    }
                };
                HostKind::Qemu(QemuConfig {
                    memory_mb: v.int(&bounds::QEMU_MEMORY_MB, Some(i), h.memory_mb)?,
                    cpus: v.int(&bounds::QEMU_CPUS, Some(i), h.cpus)?,
                    accel,
                    // TCG boots the tiny kernel in ~3 s; 3 min leaves room for a loaded box.
                    boot_timeout_s: v.int(
                        &bounds::QEMU_BOOT_TIMEOUT_S,
                        Some(i),
                        h.boot_timeout_s,
                    )?,
                    scratch_mb: v.int(&bounds::QEMU_SCRATCH_MB, Some(i), h.scratch_mb)?,
                    extra_cmdline: h.extra_cmdline.clone().unwrap_or_default(),
                    disk: super::disk::disk(v, i, &h)?,
                })
            }
            "ssh" => HostKind::Ssh(Box::new(ssh(v, i, &h)?)),
            "lava" => HostKind::Lava(Box::new(lava(v, i, &h)?)),
            other => {
                return Err(v.field(
                    &at("kind"),
                    format!(
                        "{} is not a host kind this version knows (\"qemu\", \"ssh\", \"lava\")",
                        snippet(other)
                    ),
                ))
            }
        };
        let wrong = match &kind {
            HostKind::Qemu(_) => [h.ssh_fields_set(), h.lava_fields_set()].concat(),
            HostKind::Ssh(_) => [h.qemu_fields_set(), h.lava_fields_set()].concat(),
            HostKind::Lava(_) => {
                let mut w = h.ssh_fields_set();
                w.extend(
                    h.qemu_fields_set()
                        .into_iter()
                        .filter(|f| !matches!(*f, "scratch_mb" | "extra_cmdline")),
                );
                if h.boot_timeout_s.is_some() {
                    w.push("boot_timeout_s");
                }
                w
            }
        };
        if let Some(f) = wrong.first() {
            return Err(v.field(
                &at(f),
                format!(
                    "is not read by kind = {}: remove it, or change the kind",
                    snippet(&h.kind)
                ),
            ));
        }
        if hosts
            .iter()
            .any(|x: &HostConfig| Some(&x.name) == h.name.as_ref())
        {
            return Err(v.field(
                &at("name"),
                "is used by an earlier host: give each host its own name",
            ));
        }
        hosts.push(HostConfig {
            name: h.name.unwrap_or_else(|| format!("{}{i}", h.kind)),
            kind,
        });
    }

    Ok(hosts)
}

/// A `kind = "ssh"` host, the `i`th.
fn ssh(v: &Validator, i: usize, h: &RawHost) -> Result<SshConfig, ConfigError> {
    let at = |f: &str| format!("hosts[{i}].{f}");
    use super::ssh::{HostKeyCheck, SshAuth, SshTarget};
    let address = h.address.as_deref().ok_or_else(|| {
        v.field(
            &at("address"),
            "is missing: give user@host or user@host:port",
        )
    })?;
    let (user, host, port) = parse_address(address).ok_or_else(|| {
        v.field(
            &at("address"),
            format!("{} is not user@host or user@host:port", snippet(address)),
        )
    })?;
    let auth = match &h.identity_file {
        Some(f) => SshAuth::KeyFile(v.path(&at("identity_file"), f)?),
        None => SshAuth::Agent,
    };
    let host_key = match (h.insecure_ignore_host_key.unwrap_or(false), &h.known_hosts) {
        (true, Some(_)) => {
            return Err(v.field(
                &at("insecure_ignore_host_key"),
                "is true while known_hosts is set: keep one (known_hosts checks the key)",
            ))
        }
        (true, None) => HostKeyCheck::InsecureIgnore,
        (false, k) => HostKeyCheck::KnownHosts(v.path(
            &at("known_hosts"),
            k.as_deref().unwrap_or("~/.ssh/known_hosts"),
        )?),
    };
    let install = match h.install.as_deref().unwrap_or("kexec") {
        "kexec" => Install::Kexec { cmdline: h.kexec_cmdline.clone() },
        "grub-reboot" => Install::GrubReboot {
            entry: h.grub_entry.clone().ok_or_else(|| {
                v.field(
                    &at("grub_entry"),
                    "is missing for install = \"grub-reboot\": give the menu entry, e.g. \"Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux {release}\"",
                )
            })?,
        },
        "commands" => {
            let commands = h.install_commands.clone().unwrap_or_default();
            if commands.is_empty() {
                return Err(v.field(
                    &at("install_commands"),
                    "is missing or empty for install = \"commands\": list the commands, using {image}, {release}, {initrd}",
                ));
            }
            Install::Commands {
                commands,
                reboot: h.reboot_command.clone().unwrap_or_else(|| "reboot".into()),
            }
        }
        other => {
            return Err(v.field(
                &at("install"),
                format!(
                    "{} is not one of \"kexec\", \"grub-reboot\", \"commands\"",
                    snippet(other)
                ),
            ))
        }
    };
    for (f, bad) in [
        (
            "kexec_cmdline",
            h.kexec_cmdline.is_some() && !matches!(install, Install::Kexec { .. }),
        ),
        (
            "grub_entry",
            h.grub_entry.is_some() && !matches!(install, Install::GrubReboot { .. }),
        ),
        (
            "install_commands",
            h.install_commands.is_some() && !matches!(install, Install::Commands { .. }),
        ),
        (
            "reboot_command",
            h.reboot_command.is_some() && !matches!(install, Install::Commands { .. }),
        ),
    ] {
        if bad {
            return Err(v.field(
                &at(f),
                "is not read by this install method: remove it, or change install",
            ));
        }
    }
    let agent_port: u16 = v.int(&bounds::SSH_AGENT_PORT, Some(i), h.agent_port)?;
    let agent_url = h.agent_url.clone().unwrap_or_else(|| {
        if host.contains(':') {
            format!("http://[{host}]:{agent_port}")
        } else {
            format!("http://{host}:{agent_port}")
        }
    });
    if !agent_url.starts_with("http://") {
        return Err(v.field(
            &at("agent_url"),
            format!("{} is not an http:// URL", snippet(&agent_url)),
        ));
    }
    if let Some(cmd) = &h.power_cycle {
        bounds::SSH_POWER_CYCLE_BYTES
            .length(cmd)
            .map_err(|m| v.field(&at("power_cycle"), m))?;
    }
    let remote_dir = h
        .remote_dir
        .clone()
        .unwrap_or_else(|| "/var/tmp/firstbad".into());
    if !remote_dir.starts_with('/') {
        return Err(v.field(
            &at("remote_dir"),
            format!(
                "{} must be an absolute path on the machine",
                snippet(&remote_dir)
            ),
        ));
    }
    Ok(SshConfig {
        target: SshTarget {
            user,
            host,
            port,
            auth,
            host_key,
            // 15 s: a dead peer is noticed well inside any command deadline.
            keepalive: std::time::Duration::from_secs(v.int(
                &bounds::SSH_KEEPALIVE_S,
                Some(i),
                h.keepalive_s,
            )?),
        },
        connect_timeout_s: v.int(&bounds::SSH_CONNECT_TIMEOUT_S, Some(i), h.connect_timeout_s)?,
        command_timeout_s: v.int(&bounds::SSH_COMMAND_TIMEOUT_S, Some(i), h.command_timeout_s)?,
        // Server firmware alone can take minutes (memory training); kexec skips it.
        boot_timeout_s: v.int(&bounds::SSH_BOOT_TIMEOUT_S, Some(i), h.boot_timeout_s)?,
        install,
        power_cycle: h.power_cycle.clone(),
        console: h.console.clone(),
        agent_port,
        agent_url,
        remote_dir,
    })
}

/// A `kind = "lava"` host, the `i`th.
fn lava(v: &Validator, i: usize, h: &RawHost) -> Result<LavaConfig, ConfigError> {
    let at = |f: &str| format!("hosts[{i}].{f}");
    if h.token.is_some() {
        return Err(v.field(
            &at("token"),
            "a secret does not go in a hunt file: put the LAVA token in a file (token_file = \"~/.config/firstbad/lava-token\") or an environment variable (token_env = \"LAVA_TOKEN\")",
        ));
    }
    let server = h.server.as_deref().ok_or_else(|| {
        v.field(
            &at("server"),
            "is missing: give the LAVA server's URL, e.g. \"http://lava.example.org\"",
        )
    })?;
    // The token goes to the server: https, or http to this machine only (issue 32, finding 7).
    let http_url = |field: &str, u: &str, carries| {
        super::url::checked_url(u, carries)
            .map(|_| u.trim().trim_end_matches('/').to_owned())
            .map_err(|why| v.field(&at(field), why))
    };
    let server = http_url(
        "server",
        server,
        super::url::Carries::Secret("the LAVA API token"),
    )?;
    let token = match (&h.token_file, &h.token_env) {
        (Some(_), Some(_)) => {
            return Err(v.field(
                &at("token_env"),
                "is set beside token_file: keep one source for the token",
            ))
        }
        (Some(f), None) => LavaToken::File(v.path(&at("token_file"), f)?),
        (None, Some(e)) if !e.is_empty() && !e.contains(['=', '\0']) => LavaToken::Env(e.clone()),
        (None, Some(e)) => {
            return Err(v.field(
                &at("token_env"),
                format!("{} is not an environment variable's name", snippet(e)),
            ))
        }
        (None, None) => {
            return Err(v.field(
                &at("token_file"),
                "is missing: give the file holding the LAVA API token (or token_env, the variable holding it)",
            ))
        }
    };
    let device_type = h.device_type.clone().ok_or_else(|| {
        v.field(
            &at("device_type"),
            "is missing: give the LAVA device type the jobs ask for, e.g. \"qemu\"",
        )
    })?;
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if !word(&device_type) {
        return Err(v.field(
            &at("device_type"),
            format!("{} is not a LAVA device type name", snippet(&device_type)),
        ));
    }
    let tags = h.tags.clone().unwrap_or_default();
    if let Some(t) = tags.iter().find(|t| !word(t)) {
        return Err(v.field(
            &at("tags"),
            format!("{} is not a LAVA tag name", snippet(t)),
        ));
    }
    let images_url = h
        .images_url
        .as_deref()
        .map(|u| http_url("images_url", u, super::url::Carries::Public))
        .transpose()?;
    Ok(LavaConfig {
        server,
        token,
        device_type,
        tags,
        jobs: v.int(&bounds::LAVA_JOBS, Some(i), h.jobs)?,
        job_timeout_s: v.int(&bounds::LAVA_JOB_TIMEOUT_S, Some(i), h.job_timeout_s)?,
        server_deadline_s: v.int(
            &bounds::LAVA_SERVER_DEADLINE_S,
            Some(i),
            h.server_deadline_s,
        )?,
        scratch_mb: v.int(&bounds::LAVA_SCRATCH_MB, Some(i), h.scratch_mb)?,
        extra_cmdline: h.extra_cmdline.clone().unwrap_or_default(),
        images_url,
    })
}

/// `user@host`, `user@host:port`, `user@[v6]:port`.
fn parse_address(a: &str) -> Option<(String, String, u16)> {
    let (user, rest) = a.split_once('@')?;
    if user.is_empty() || rest.is_empty() {
        return None;
    }
    let (host, port) = if let Some(r) = rest.strip_prefix('[') {
        let (h, after) = r.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => 22,
            None => return None,
        };
        (h.to_owned(), port)
    } else {
        match rest.split_once(':') {
            Some((h, p)) => (h.to_owned(), p.parse().ok()?),
            None => (rest.to_owned(), 22),
        }
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return None;
    }
    Some((user.to_owned(), host, port))
}
