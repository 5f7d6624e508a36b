//! How a machine is reached over SSH (`[[hosts]] kind = "ssh"`), as the hunt file says it;
//! `hosts::ssh_conn` connects with it.

use std::path::PathBuf;
use std::time::Duration;

/// Where and how to reach a host over SSH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// Login name.
    pub user: String,
    /// Host name or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// How to authenticate.
    pub auth: SshAuth,
    /// How to check the host's key.
    pub host_key: HostKeyCheck,
    /// Interval of SSH keepalive messages.
    pub keepalive: Duration,
}

/// Authentication method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshAuth {
    /// A private key file (OpenSSH or PEM format, no passphrase).
    KeyFile(PathBuf),
    /// The keys of the running ssh-agent (`$SSH_AUTH_SOCK`).
    Agent,
}

/// Host key checking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyCheck {
    /// The key must be in this OpenSSH known_hosts file.
    KnownHosts(PathBuf),
    /// No check (`insecure_ignore_host_key = true`): the explicit opt-out.
    InsecureIgnore,
}
