//! One SSH connection (ssh2 / libssh2) whose every call ends by a deadline firstbad enforces.
//!
//! ssh2 is in maintenance mode and libssh2 can block forever on a peer that stops answering.
//! So no ssh2 call runs on a tokio worker: each runs on its own OS thread, and the caller
//! waits for it with `tokio::time::timeout`. When the deadline passes, firstbad shuts the TCP
//! socket down under libssh2 (`shutdown(2)` on a clone of the descriptor), which makes the
//! blocked `poll`/`recv` inside libssh2 return at once, and marks the connection dead. The
//! libssh2 session timeout (`Session::set_timeout`) is set as well, as a second bound. The
//! number of calls still running is observable ([`Conn::in_flight`]) so that tests prove the
//! thread really came back and was not merely abandoned.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::config::ssh::{HostKeyCheck, SshAuth, SshTarget};

impl SshTarget {
    /// `user@host:port`, for messages.
    pub fn label(&self) -> String {
        format!("{}@{}:{}", self.user, self.host, self.port)
    }
}

/// libssh2's own timeout for a call with firstbad deadline `deadline`: a backstop, twice the
/// deadline and at least 1 s later, so that firstbad's deadline always fires first and is
/// reported as such. Equal bounds raced: on a loaded box libssh2's timeout won and a silent
/// peer was reported as a failed handshake instead of a missed deadline.
fn backstop_ms(deadline: Duration) -> u32 {
    let ms = deadline
        .as_millis()
        .saturating_mul(2)
        .max(deadline.as_millis() + 1000);
    ms.min(u32::MAX as u128) as u32
}

/// The SSH keepalive interval for libssh2, in seconds (it takes 1..=3600 here).
fn keepalive_interval(keepalive: Duration) -> u32 {
    keepalive.as_secs().clamp(1, 3600) as u32
}

/// An SSH failure.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    /// The call did not end in time; the connection was closed under it.
    #[error("{target}: {what} did not finish within {secs:.0} s; firstbad closed the connection")]
    Deadline {
        /// `user@host:port`.
        target: String,
        /// The call.
        what: String,
        /// The deadline.
        secs: f64,
    },
    /// The host's key is not the one in known_hosts.
    #[error("{target}: the host key ({key_type}) does not match {known_hosts}: the host was reinstalled, or this is not the machine you think; check it, then fix the known_hosts entry (ssh-keygen -R)")]
    HostKeyMismatch {
        /// `user@host:port`.
        target: String,
        /// Key type offered.
        key_type: String,
        /// The known_hosts file.
        known_hosts: String,
    },
    /// The host's key is in no known_hosts line.
    #[error("{target}: the host is not in {known_hosts}: add its key (ssh-keyscan -p {port} {host} >> {known_hosts}) after checking it, or set insecure_ignore_host_key = true")]
    UnknownHost {
        /// `user@host:port`.
        target: String,
        /// Host name.
        host: String,
        /// Port.
        port: u16,
        /// The known_hosts file.
        known_hosts: String,
    },
    /// Any other failure: TCP, handshake, authentication, channel, I/O.
    #[error("{target}: {what}: {message}")]
    Failed {
        /// `user@host:port`.
        target: String,
        /// What was being done.
        what: String,
        /// Why.
        message: String,
    },
}

/// The result of a remote command.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit status (-1 when the server sent none).
    pub status: i32,
    /// stdout and stderr, merged in arrival order.
    pub output: String,
}

/// An authenticated SSH connection.
pub struct Conn {
    target: SshTarget,
    session: Arc<Mutex<ssh2::Session>>,
    socket: Arc<TcpStream>,
    dead: Arc<AtomicBool>,
    in_flight: Arc<AtomicUsize>,
}

/// Runs `f` on its own thread and waits for it until `deadline`; on expiry calls `on_expiry`
/// (which unblocks the thread) and returns `None`. The thread is not joined: a libssh2 call
/// that ignores the closed socket can at worst leak one thread, never hang the hunt.
async fn on_thread<T: Send + 'static>(
    in_flight: &Arc<AtomicUsize>,
    deadline: Duration,
    f: impl FnOnce() -> T + Send + 'static,
    on_expiry: impl FnOnce(),
) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let count = in_flight.clone();
    count.fetch_add(1, Ordering::SeqCst);
    std::thread::Builder::new()
        .name("firstbad-ssh".into())
        .spawn(move || {
            let r = f();
            count.fetch_sub(1, Ordering::SeqCst);
            let _ = tx.send(r);
        })
        .expect("spawning a thread");
    match tokio::time::timeout(deadline, rx).await {
        Ok(Ok(r)) => Some(r),
        // The thread panicked: treat as expired.
        Ok(Err(_)) => None,
        Err(_) => {
            on_expiry();
            None
        }
    }
}

fn shutdown_socket(s: &TcpStream) {
    // SAFETY: shutdown(2) on a descriptor this process owns (kept open by the Arc).
    unsafe {
        libc::shutdown(s.as_raw_fd(), libc::SHUT_RDWR);
    }
}

fn set_tcp_keepalive(s: &TcpStream, idle: Duration) {
    let fd = s.as_raw_fd();
    let idle = keepalive_interval(idle) as libc::c_int;
    let one: libc::c_int = 1;
    let count: libc::c_int = 3;
    let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: setsockopt with pointers to live c_ints of the given size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_KEEPALIVE,
            &one as *const _ as *const libc::c_void,
            size,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPIDLE,
            &idle as *const _ as *const libc::c_void,
            size,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            &idle as *const _ as *const libc::c_void,
            size,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPCNT,
            &count as *const _ as *const libc::c_void,
            size,
        );
    }
}

impl Conn {
    /// Connects, checks the host key and authenticates, all within `deadline`.
    pub async fn connect(target: &SshTarget, deadline: Duration) -> Result<Conn, SshError> {
        let in_flight = Arc::new(AtomicUsize::new(0));
        Self::connect_counted(target, deadline, in_flight).await
    }

    /// [`Conn::connect`] counting its thread in `in_flight` (for tests of the deadline).
    pub async fn connect_counted(
        target: &SshTarget,
        deadline: Duration,
        in_flight: Arc<AtomicUsize>,
    ) -> Result<Conn, SshError> {
        let label = target.label();
        let slot: Arc<Mutex<Option<Arc<TcpStream>>>> = Arc::new(Mutex::new(None));
        let t = target.clone();
        let slot2 = slot.clone();
        let r = on_thread(
            &in_flight,
            deadline,
            move || handshake(&t, deadline, &slot2),
            || {
                if let Some(s) = slot.lock().expect("socket slot").as_ref() {
                    shutdown_socket(s);
                }
            },
        )
        .await;
        match r {
            None => Err(SshError::Deadline {
                target: label,
                what: "connect (TCP, handshake, host key, authentication)".into(),
                secs: deadline.as_secs_f64(),
            }),
            Some(Err(e)) => Err(e),
            Some(Ok((session, socket))) => Ok(Conn {
                target: target.clone(),
                session: Arc::new(Mutex::new(session)),
                socket,
                dead: Arc::new(AtomicBool::new(false)),
                in_flight,
            }),
        }
    }

    /// How many of this connection's calls are still running on their threads.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The shared in-flight counter.
    pub fn in_flight_counter(&self) -> Arc<AtomicUsize> {
        self.in_flight.clone()
    }

    /// Whether a deadline or an error closed this connection.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// The target.
    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    async fn call<T: Send + 'static>(
        &self,
        what: &str,
        deadline: Duration,
        f: impl FnOnce(&ssh2::Session) -> Result<T, String> + Send + 'static,
    ) -> Result<T, SshError> {
        let label = self.target.label();
        if self.is_dead() {
            return Err(SshError::Failed {
                target: label,
                what: what.into(),
                message: "the connection was closed by an earlier failure".into(),
            });
        }
        let session = self.session.clone();
        let socket = self.socket.clone();
        let dead = self.dead.clone();
        let keepalive = keepalive_interval(self.target.keepalive);
        let r = on_thread(
            &self.in_flight,
            deadline,
            move || {
                let s = session.lock().expect("one call at a time");
                // The libssh2 bound: a wait on the socket longer than this fails.
                s.set_timeout(backstop_ms(deadline));
                // One SSH keepalive before the call, then libssh2's own keepalive off for
                // the call: in blocking mode it shortens each wait on the socket to the
                // keepalive interval and fails the call ("Timed out waiting on socket") when
                // the machine has said nothing for that long, as update-grub can (the test
                // `exec_and_upload_against_a_real_sshd` runs a command silent for 7 s with a
                // 5 s keepalive). During a call TCP keepalive and the deadline watch the peer.
                s.set_keepalive(true, keepalive);
                let _ = s.keepalive_send();
                s.set_keepalive(true, 0);
                f(&s)
            },
            || {
                dead.store(true, Ordering::SeqCst);
                shutdown_socket(&socket);
            },
        )
        .await;
        match r {
            None => Err(SshError::Deadline {
                target: label,
                what: what.into(),
                secs: deadline.as_secs_f64(),
            }),
            Some(Err(message)) => {
                self.dead.store(true, Ordering::SeqCst);
                Err(SshError::Failed {
                    target: label,
                    what: what.into(),
                    message,
                })
            }
            Some(Ok(v)) => Ok(v),
        }
    }

    /// Runs `command` through the remote shell; stdout and stderr merged.
    ///
    /// The command dies with its deadline on the machine too ([`remote_timeout`]): when
    /// firstbad gives up on a call, nothing it started keeps running there.
    pub async fn exec(&self, command: &str, deadline: Duration) -> Result<Output, SshError> {
        let cmd = remote_timeout(command, deadline);
        self.call(&format!("running `{command}`"), deadline, move |s| {
            let e = |e: ssh2::Error| e.to_string();
            let mut ch = s.channel_session().map_err(e)?;
            // Merged, so that neither stream can fill the window while the other is read.
            ch.handle_extended_data(ssh2::ExtendedData::Merge)
                .map_err(e)?;
            ch.exec(&cmd).map_err(e)?;
            let mut out = Vec::new();
            ch.read_to_end(&mut out).map_err(|e| e.to_string())?;
            ch.wait_close().map_err(e)?;
            let status = ch.exit_status().unwrap_or(-1);
            Ok(Output {
                status,
                output: String::from_utf8_lossy(&out).into_owned(),
            })
        })
        .await
    }

    /// Runs `command` and fails unless it exits 0; returns its output.
    pub async fn check(&self, command: &str, deadline: Duration) -> Result<String, SshError> {
        let out = self.exec(command, deadline).await?;
        if out.status != 0 {
            return Err(SshError::Failed {
                target: self.target.label(),
                what: format!("running `{command}`"),
                message: format!("exit status {}: {}", out.status, out.output.trim()),
            });
        }
        Ok(out.output)
    }

    /// Copies `data` to `remote` with file mode `mode`, through `cat` on the remote shell:
    /// no scp or sftp server is needed on the machine (minimal images lack them).
    pub async fn upload_bytes(
        &self,
        data: Vec<u8>,
        remote: &str,
        mode: u32,
        deadline: Duration,
    ) -> Result<(), SshError> {
        let q = shell_quote(remote);
        // The size check matters: when the connection dies mid-upload, sshd closes cat's
        // stdin and cat exits 0 with half the file (the network-cut test caught this).
        let cmd = format!(
            "cat > {q}.part && [ \"$(wc -c < {q}.part)\" -eq {len} ] && chmod {mode:o} {q}.part && mv -f {q}.part {q}",
            len = data.len()
        );
        let r = self
            .call(&format!("uploading {remote}"), deadline, move |s| {
                let e = |e: ssh2::Error| e.to_string();
                let mut ch = s.channel_session().map_err(e)?;
                ch.handle_extended_data(ssh2::ExtendedData::Merge)
                    .map_err(e)?;
                ch.exec(&cmd).map_err(e)?;
                for chunk in data.chunks(32 * 1024) {
                    ch.write_all(chunk).map_err(|e| e.to_string())?;
                }
                ch.send_eof().map_err(e)?;
                let mut out = Vec::new();
                ch.read_to_end(&mut out).map_err(|e| e.to_string())?;
                ch.wait_close().map_err(e)?;
                Ok((
                    ch.exit_status().unwrap_or(-1),
                    String::from_utf8_lossy(&out).into_owned(),
                ))
            })
            .await?;
        if r.0 != 0 {
            return Err(SshError::Failed {
                target: self.target.label(),
                what: format!("uploading {remote}"),
                message: format!("exit status {}: {}", r.0, r.1.trim()),
            });
        }
        Ok(())
    }

    /// Copies the local file `local` to `remote`.
    pub async fn upload(
        &self,
        local: &Path,
        remote: &str,
        mode: u32,
        deadline: Duration,
    ) -> Result<(), SshError> {
        let data = std::fs::read(local).map_err(|e| SshError::Failed {
            target: self.target.label(),
            what: format!("reading {}", local.display()),
            message: e.to_string(),
        })?;
        self.upload_bytes(data, remote, mode, deadline).await
    }

    /// Closes the connection (does not wait for the peer).
    pub fn close(&self) {
        self.dead.store(true, Ordering::SeqCst);
        shutdown_socket(&self.socket);
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        shutdown_socket(&self.socket);
    }
}

type Handshaken = (ssh2::Session, Arc<TcpStream>);

fn handshake(
    t: &SshTarget,
    deadline: Duration,
    slot: &Mutex<Option<Arc<TcpStream>>>,
) -> Result<Handshaken, SshError> {
    let label = t.label();
    let fail = |what: &str, message: String| SshError::Failed {
        target: label.clone(),
        what: what.into(),
        message,
    };
    let addrs: Vec<SocketAddr> = (t.host.as_str(), t.port)
        .to_socket_addrs()
        .map_err(|e| fail("resolving the host name", e.to_string()))?
        .collect();
    let addr = addrs
        .first()
        .ok_or_else(|| fail("resolving the host name", "no address".into()))?;
    let tcp = TcpStream::connect_timeout(addr, deadline)
        .map_err(|e| fail("TCP connect", e.to_string()))?;
    set_tcp_keepalive(&tcp, t.keepalive);
    let keep = Arc::new(
        tcp.try_clone()
            .map_err(|e| fail("TCP connect", e.to_string()))?,
    );
    *slot.lock().expect("socket slot") = Some(keep.clone());
    let mut s = ssh2::Session::new().map_err(|e| fail("starting libssh2", e.to_string()))?;
    s.set_timeout(backstop_ms(deadline));
    s.set_tcp_stream(tcp);
    s.handshake()
        .map_err(|e| fail("SSH handshake", e.to_string()))?;

    if let HostKeyCheck::KnownHosts(file) = &t.host_key {
        let (key, key_type) = s
            .host_key()
            .ok_or_else(|| fail("reading the host key", "the server sent none".into()))?;
        let mut kh = s
            .known_hosts()
            .map_err(|e| fail("known_hosts", e.to_string()))?;
        if file.is_file() {
            kh.read_file(file, ssh2::KnownHostFileKind::OpenSSH)
                .map_err(|e| fail(&format!("reading {}", file.display()), e.to_string()))?;
        }
        match kh.check_port(&t.host, t.port, key) {
            ssh2::CheckResult::Match => {}
            ssh2::CheckResult::Mismatch => {
                return Err(SshError::HostKeyMismatch {
                    target: label,
                    key_type: format!("{key_type:?}"),
                    known_hosts: file.display().to_string(),
                })
            }
            ssh2::CheckResult::NotFound => {
                return Err(SshError::UnknownHost {
                    target: label,
                    host: t.host.clone(),
                    port: t.port,
                    known_hosts: file.display().to_string(),
                })
            }
            ssh2::CheckResult::Failure => {
                return Err(fail(
                    "checking the host key",
                    format!("libssh2 could not check it against {}", file.display()),
                ))
            }
        }
    }

    match &t.auth {
        SshAuth::KeyFile(key) => s
            .userauth_pubkey_file(&t.user, None, key, None)
            .map_err(|e| {
                fail(
                    "authentication",
                    format!("key {} refused: {e}", key.display()),
                )
            })?,
        SshAuth::Agent => s.userauth_agent(&t.user).map_err(|e| {
            fail(
                "authentication",
                format!("no ssh-agent key accepted (is SSH_AUTH_SOCK set?): {e}"),
            )
        })?,
    }
    if !s.authenticated() {
        return Err(fail("authentication", "refused".into()));
    }
    // SSH keepalives are sent only after authentication ([`Conn::call`] sends one before
    // each call): dropbear drops a client whose keepalive (a global request) comes before
    // userauth ("Received message 80 before userauth"; the lab VM test caught it; OpenSSH
    // tolerates it).
    Ok((s, keep))
}

/// `command` wrapped so that the machine kills it when `deadline` has passed: closing the
/// connection does not stop a remote command (sshd only closes its pipes, and a `sleep` or a
/// hung `kexec -l` never reads them). `timeout -s KILL` is in coreutils and in busybox. GNU
/// timeout kills the command's whole process group; busybox's kills only the `sh -c` (which
/// execs a simple command, so that dies; a compound command's running child can outlive
/// it there). On a machine without `timeout` the command runs as it is, bounded only by
/// firstbad's side.
///
/// The remote bound is the deadline rounded up to whole seconds (busybox's timeout takes
/// no fractions): it fires at most a second after firstbad has given up, never before.
pub fn remote_timeout(command: &str, deadline: Duration) -> String {
    let secs = deadline.as_secs() + u64::from(deadline.subsec_nanos() > 0);
    let q = shell_quote(command);
    format!(
        "if command -v timeout >/dev/null 2>&1; then exec timeout -s KILL {secs} sh -c {q}; else exec sh -c {q}; fi",
        secs = secs.max(1)
    )
}

/// Quotes `s` for a POSIX shell: `'…'` with each `'` written as `'\''`.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Replaces `{image}`, `{release}` and `{initrd}` in a user command with shell-quoted values.
pub fn fill_placeholders(template: &str, image: &str, release: &str, initrd: &str) -> String {
    template
        .replace("{image}", &shell_quote(image))
        .replace("{release}", &shell_quote(release))
        .replace("{initrd}", &shell_quote(initrd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_always_quoted() {
        assert_eq!(shell_quote("/var/tmp/vmlinuz-6.1"), "/var/tmp/vmlinuz-6.1");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("x'; rm -rf /; '"), r"'x'\''; rm -rf /; '\'''");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(
            fill_placeholders(
                "cp {image} /boot/vmlinuz-{release} && echo {initrd}",
                "/tmp/my image",
                "6.1.0-fb$(id)",
                ""
            ),
            "cp '/tmp/my image' /boot/vmlinuz-'6.1.0-fb$(id)' && echo ''"
        );
    }

    #[test]
    fn a_remote_command_runs_under_its_deadline_rounded_up() {
        let w = remote_timeout("echo 'a b'", Duration::from_millis(2500));
        assert!(
            w.contains(r"exec timeout -s KILL 3 sh -c 'echo '\''a b'\'''"),
            "{w}"
        );
        assert!(w.contains("else exec sh -c"), "{w}");
        assert!(remote_timeout("true", Duration::from_millis(10)).contains(" KILL 1 "));
        // The wrapped command runs with its arguments intact and keeps its exit status.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(remote_timeout(
                r#"printf '%s|' "a b" c; exit 3"#,
                Duration::from_secs(5),
            ))
            .output()
            .expect("sh runs");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a b|c|");
        assert_eq!(out.status.code(), Some(3));
    }
}
