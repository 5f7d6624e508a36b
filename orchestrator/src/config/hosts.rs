//! `[[hosts]]` of kind `ssh`: the address, authentication, host key and install method.

use super::raw::RawHost;
use super::validate::Validator;
use super::{Install, SshConfig};
use crate::error::ConfigError;

pub(super) fn validate_ssh(
    v: &Validator,
    at: &dyn Fn(&str) -> String,
    h: &RawHost,
) -> Result<SshConfig, ConfigError> {
    use crate::hosts::ssh_conn::{HostKeyCheck, SshAuth, SshTarget};
    let address = h.address.as_deref().ok_or_else(|| {
        v.field(
            &at("address"),
            "is missing: give user@host or user@host:port",
        )
    })?;
    let (user, host, port) = parse_address(address).ok_or_else(|| {
        v.field(
            &at("address"),
            format!("{address:?} is not user@host or user@host:port"),
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
                format!("{other:?} is not one of \"kexec\", \"grub-reboot\", \"commands\""),
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
    let agent_port = h.agent_port.unwrap_or(firstbad_wire::GUEST_AGENT_PORT);
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
            format!("{agent_url:?} is not an http:// URL"),
        ));
    }
    let remote_dir = h
        .remote_dir
        .clone()
        .unwrap_or_else(|| "/var/tmp/firstbad".into());
    if !remote_dir.starts_with('/') {
        return Err(v.field(
            &at("remote_dir"),
            format!("{remote_dir:?} must be an absolute path on the machine"),
        ));
    }
    let positive = |f: &str, x: Option<u64>, default: u64| -> Result<u64, ConfigError> {
        match x {
            Some(0) => Err(v.field(&at(f), "must be at least 1")),
            Some(x) => Ok(x),
            None => Ok(default),
        }
    };
    Ok(SshConfig {
        target: SshTarget {
            user,
            host,
            port,
            auth,
            host_key,
            // 15 s: a dead peer is noticed well inside any command deadline.
            keepalive: std::time::Duration::from_secs(positive("keepalive_s", h.keepalive_s, 15)?),
        },
        connect_timeout_s: positive("connect_timeout_s", h.connect_timeout_s, 15)?,
        command_timeout_s: positive("command_timeout_s", h.command_timeout_s, 120)?,
        // Server firmware alone can take minutes (memory training); kexec skips it.
        boot_timeout_s: positive("boot_timeout_s", h.boot_timeout_s, 600)?,
        install,
        power_cycle: h.power_cycle.clone(),
        console: h.console.clone(),
        agent_port,
        agent_url,
        remote_dir,
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
