//! `[[hosts]]`: each host's kind and the fields that kind reads, qemu's and ssh's.

use super::bounds;
use super::raw::RawHost;
use super::read::snippet;
use super::validate::Validator;
use super::{Accel, HostConfig, HostKind, Install, LavaConfig, LavaToken, QemuConfig, SshConfig};
use crate::error::ConfigError;

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
