//! The ssh host kind against real SSH servers (issue #6).
//!
//! Each test starts its own OpenSSH server (`/usr/sbin/sshd -D`) as a child on 127.0.0.1 with
//! a random port, a fresh host key and an authorized_keys in a temp dir; nothing leaves
//! loopback. Faults are real: a listener that accepts TCP and never speaks, a proxy that stops
//! forwarding mid-upload (a cable pulled: no FIN, no RST), a host key that is not the one on
//! file, a command that outlives its deadline. Every test asserts that it ended in bounded
//! time and, where libssh2 was blocked, that its thread came back.

use firstbad::hosts::ssh_conn::{Conn, HostKeyCheck, SshAuth, SshError, SshTarget};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A private OpenSSH server for one test; killed on drop.
struct Sshd {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen runs (apt install openssh-client)");
    assert!(st.success());
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Sshd {
    fn start() -> Sshd {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        // sshd's privilege separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let port = free_port();
        let cfg = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\nPidFile none\nUsePAM no\nStrictModes no\nPermitRootLogin yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nSubsystem sftp internal-sftp\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), cfg).unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("sshd.log")).unwrap())
            .spawn()
            .expect("sshd starts (apt install openssh-server)");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "sshd did not listen: {}",
                std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Sshd { child, port, dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A known_hosts file holding this server's real key.
    fn known_hosts(&self) -> PathBuf {
        let key = std::fs::read_to_string(self.path("host_key.pub")).unwrap();
        let mut parts = key.split_whitespace();
        let line = format!(
            "[127.0.0.1]:{} {} {}\n",
            self.port,
            parts.next().unwrap(),
            parts.next().unwrap()
        );
        let p = self.path("known_hosts");
        std::fs::write(&p, line).unwrap();
        p
    }

    fn target(&self, port: u16) -> SshTarget {
        SshTarget {
            user: "root".into(),
            host: "127.0.0.1".into(),
            port,
            auth: SshAuth::KeyFile(self.path("client_key")),
            host_key: HostKeyCheck::KnownHosts(self.known_hosts()),
            keepalive: Duration::from_secs(5),
        }
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Waits until no libssh2 call of the counter is still running; panics after `limit`.
fn threads_come_back(counter: &AtomicUsize, limit: Duration) -> Duration {
    let t = Instant::now();
    while counter.load(Ordering::SeqCst) != 0 {
        assert!(
            t.elapsed() < limit,
            "a libssh2 call is still blocked {:?} after firstbad's deadline",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t.elapsed()
}

#[test]
fn exec_and_upload_against_a_real_sshd() {
    let sshd = Sshd::start();
    let rt = rt();
    rt.block_on(async {
        let c = Conn::connect(&sshd.target(sshd.port), Duration::from_secs(10))
            .await
            .expect("connects with the key and the known host key");
        let out = c
            .exec("echo out; echo err >&2; exit 3", Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(out.status, 3);
        assert!(out.output.contains("out") && out.output.contains("err"));
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let remote = sshd.path("uploaded").display().to_string();
        c.upload_bytes(data.clone(), &remote, 0o600, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(std::fs::read(&remote).unwrap(), data);
        let sum = c
            .check(&format!("wc -c < {remote}"), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(sum.trim(), "3000000");
        let mode = c
            .check(&format!("stat -c %a {remote}"), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(mode.trim(), "600");
    });
}

/// A host key that is not the one on file is refused, and the message says what to do.
#[test]
fn a_wrong_host_key_is_refused_with_a_clear_message() {
    let sshd = Sshd::start();
    let other = sshd.path("other_key");
    keygen(&other);
    let key = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let mut parts = key.split_whitespace();
    let kh = sshd.path("wrong_known_hosts");
    std::fs::write(
        &kh,
        format!(
            "[127.0.0.1]:{} {} {}\n",
            sshd.port,
            parts.next().unwrap(),
            parts.next().unwrap()
        ),
    )
    .unwrap();
    let mut t = sshd.target(sshd.port);
    t.host_key = HostKeyCheck::KnownHosts(kh.clone());
    let rt = rt();
    let e = rt
        .block_on(Conn::connect(&t, Duration::from_secs(10)))
        .err()
        .expect("a wrong host key must not connect");
    assert!(matches!(e, SshError::HostKeyMismatch { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("does not match") && msg.contains("ssh-keygen -R"),
        "{msg}"
    );
    assert!(msg.contains(&kh.display().to_string()), "{msg}");

    // A host missing from known_hosts is refused too, with the way to add it.
    t.host_key = HostKeyCheck::KnownHosts(sshd.path("empty_known_hosts"));
    let e = rt
        .block_on(Conn::connect(&t, Duration::from_secs(10)))
        .err()
        .expect("an unknown host must not connect");
    assert!(e.to_string().contains("ssh-keyscan"), "{e}");

    // The explicit opt-out connects.
    t.host_key = HostKeyCheck::InsecureIgnore;
    rt.block_on(Conn::connect(&t, Duration::from_secs(10)))
        .expect("insecure_ignore_host_key connects");
}

/// A peer that accepts TCP and never speaks (a hung sshd, a half-dead host) must not hang
/// the hunt: connect ends at firstbad's deadline, and libssh2's thread comes back.
#[test]
fn a_silent_peer_ends_at_the_connect_deadline() {
    let sshd = Sshd::start();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let (s, _) = silent.accept().unwrap();
        std::thread::sleep(Duration::from_secs(30));
        drop(s);
    });
    let counter = Arc::new(AtomicUsize::new(0));
    let rt = rt();
    let started = Instant::now();
    let e = rt
        .block_on(Conn::connect_counted(
            &sshd.target(port),
            Duration::from_secs(2),
            counter.clone(),
        ))
        .err()
        .expect("a silent peer must not connect");
    let took = started.elapsed();
    assert!(matches!(e, SshError::Deadline { .. }), "{e}");
    assert!(took < Duration::from_secs(4), "took {took:?}");
    let back = threads_come_back(&counter, Duration::from_secs(5));
    eprintln!("silent peer: deadline hit after {took:?}; libssh2 thread back {back:?} later");
    drop(held);
}

/// A command that outlives its deadline is cut; the call returns at the deadline.
#[test]
fn a_command_past_its_deadline_is_cut() {
    let sshd = Sshd::start();
    let rt = rt();
    rt.block_on(async {
        let c = Conn::connect(&sshd.target(sshd.port), Duration::from_secs(10))
            .await
            .unwrap();
        let counter = c.in_flight_counter();
        let started = Instant::now();
        let e = c
            .exec("sleep 60", Duration::from_secs(2))
            .await
            .expect_err("sleep 60 cannot finish in 2 s");
        let took = started.elapsed();
        assert!(matches!(e, SshError::Deadline { .. }), "{e}");
        assert!(took < Duration::from_secs(4), "took {took:?}");
        let back = threads_come_back(&counter, Duration::from_secs(5));
        eprintln!("sleep 60 cut at {took:?}; libssh2 thread back {back:?} later");
        assert!(c.is_dead());
    });
}

/// A TCP proxy that can be frozen: it stops forwarding and keeps both sockets open, as a
/// pulled cable or a hung host does (no FIN, no RST ever arrives).
struct FreezableProxy {
    port: u16,
    frozen: Arc<AtomicBool>,
}

impl FreezableProxy {
    fn start(to: u16) -> FreezableProxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let frozen = Arc::new(AtomicBool::new(false));
        let f = frozen.clone();
        std::thread::spawn(move || {
            for client in l.incoming() {
                let Ok(client) = client else { return };
                let server = TcpStream::connect(("127.0.0.1", to)).unwrap();
                for (mut a, mut b) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let f = f.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        loop {
                            let n = match a.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            while f.load(Ordering::SeqCst) {
                                // Frozen: hold the bytes and the sockets, forever.
                                std::thread::sleep(Duration::from_millis(100));
                            }
                            if b.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        // Keep both ends open while frozen, so the peer never sees a close.
                        while f.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    });
                }
            }
        });
        FreezableProxy { port, frozen }
    }
}

/// The network cut during an upload: the upload ends at its deadline, its thread comes
/// back, and the next connection (after the network returns) works.
#[test]
fn the_network_cut_during_upload_ends_at_the_deadline() {
    let sshd = Sshd::start();
    let proxy = FreezableProxy::start(sshd.port);
    let rt = rt();
    rt.block_on(async {
        let mut t = sshd.target(proxy.port);
        // The known_hosts line names the server's own port; through the proxy the port
        // differs, so check the key under the proxy's port.
        let key = std::fs::read_to_string(sshd.path("host_key.pub")).unwrap();
        let mut parts = key.split_whitespace();
        let kh = sshd.path("proxy_known_hosts");
        std::fs::write(
            &kh,
            format!(
                "[127.0.0.1]:{} {} {}\n",
                proxy.port,
                parts.next().unwrap(),
                parts.next().unwrap()
            ),
        )
        .unwrap();
        t.host_key = HostKeyCheck::KnownHosts(kh);
        let c = Conn::connect(&t, Duration::from_secs(10)).await.unwrap();
        let counter = c.in_flight_counter();
        let frozen = proxy.frozen.clone();
        // Cut the network 300 ms into a 64 MB upload (which takes seconds on loopback).
        let cutter = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            frozen.store(true, Ordering::SeqCst);
        });
        let remote = sshd.path("big").display().to_string();
        let started = Instant::now();
        let r = c
            .upload_bytes(vec![7u8; 64 << 20], &remote, 0o600, Duration::from_secs(4))
            .await;
        let took = started.elapsed();
        cutter.await.unwrap();
        let e = r.expect_err("an upload through a cut network cannot succeed");
        assert!(matches!(e, SshError::Deadline { .. }), "{e}");
        assert!(took < Duration::from_secs(6), "took {took:?}");
        let back = threads_come_back(&counter, Duration::from_secs(5));
        eprintln!("upload cut: returned after {took:?}; libssh2 thread back {back:?} later");
        // The network returns; a new connection works and the half file is visible as such.
        proxy.frozen.store(false, Ordering::SeqCst);
        let c2 = Conn::connect(&t, Duration::from_secs(10)).await.unwrap();
        // Give the old connection's held bytes time to drain into sshd after the thaw.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let present = c2
            .check(
                &format!("[ -e {remote} ] && echo present || echo absent"),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
        assert_eq!(
            present.trim(),
            "absent",
            "a cut upload must not leave a file under its final name"
        );
    });
}

/// The evidence for the design note on ssh2: libssh2 on its own (no session timeout) stays
/// blocked in the handshake with a silent peer for as long as the peer stays silent, and
/// firstbad's remedy, `shutdown(2)` of the socket under it, brings it back at once.
#[test]
fn libssh2_alone_blocks_on_a_silent_peer_and_shutdown_frees_it() {
    use std::os::fd::AsRawFd;
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let (s, _) = silent.accept().unwrap();
        std::thread::sleep(Duration::from_secs(20));
        drop(s);
    });
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let fd = tcp.try_clone().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = ssh2::Session::new().unwrap();
        s.set_tcp_stream(tcp);
        let r = s.handshake();
        let _ = tx.send(r.map_err(|e| e.to_string()));
    });
    // 3 s of silence: libssh2 is still waiting.
    assert!(
        rx.recv_timeout(Duration::from_secs(3)).is_err(),
        "libssh2 gave up on its own"
    );
    let cut = Instant::now();
    // SAFETY: shutdown(2) of a descriptor this test owns.
    unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
    let r = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("libssh2 returns once the socket is shut down");
    eprintln!(
        "libssh2 handshake blocked 3 s on a silent peer; returned {:?} after shutdown: {r:?}",
        cut.elapsed()
    );
    assert!(r.is_err());
    drop(held);
}
