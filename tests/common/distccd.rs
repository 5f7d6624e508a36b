//! A real `distccd` on 127.0.0.1 for the distcc tests and timings (tests/distcc.rs,
//! orchestrator/examples/distcc_times.rs).

use firstbad::config::DistccHost;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `distccd` on 127.0.0.1, its log on stderr into a file (as root it runs as the distccd
/// user, which could not open a log file of ours itself). Killed when dropped.
pub struct Daemon {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Daemon {
    /// Starts a daemon taking `jobs` compiles at once; its log is `dir/<name>.log`.
    pub fn start(dir: &Path, name: &str, jobs: u32) -> Daemon {
        for _ in 0..5 {
            let port = free_port();
            let log = dir.join(format!("{name}.log"));
            let mut cmd = Command::new("distccd");
            // Its own process group: the preforked children outlive a killed parent, and
            // are killed with the group when the daemon is dropped.
            cmd.process_group(0);
            let child = cmd
                .args([
                    "--daemon",
                    "--no-detach",
                    "--log-stderr",
                    "--log-level=info",
                ])
                .args(["--allow", "127.0.0.1", "--listen", "127.0.0.1"])
                .args(["--port", &port.to_string(), "--jobs", &jobs.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("distccd runs (scripts/install-deps installs distcc)");
            let mut d = Daemon { child, port, log };
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                // distccd logs "listening on" between bind(2) and listen(2): a compile sent
                // in between would be refused and run locally.
                if d.log_text()
                    .contains(&format!("listening on 127.0.0.1:{port}"))
                    && listening(port)
                {
                    return d;
                }
                if d.child.try_wait().unwrap().is_some() {
                    break; // the port was taken meanwhile: try another
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!("distccd on {port} did not start:\n{}", d.log_text());
        }
        panic!("no distccd started on 127.0.0.1");
    }

    /// This daemon as a `[build] distcc` entry with `slots`.
    pub fn host(&self, slots: u32) -> DistccHost {
        DistccHost {
            host: "127.0.0.1".into(),
            port: self.port,
            slots,
        }
    }

    /// What the daemon logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The compiles this daemon made: source file name and milliseconds, from its
    /// `COMPILE_OK ... time:45ms x86_64-linux-gnu-gcc inode.c` job summaries.
    pub fn jobs(&self) -> Vec<(String, u64)> {
        self.log_text()
            .lines()
            .filter(|l| l.contains("(dcc_job_summary)") && l.contains(" COMPILE_OK "))
            .map(|l| {
                let ms = l
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("time:")?.strip_suffix("ms")?.parse().ok())
                    .unwrap_or_else(|| panic!("no time: in {l:?}"));
                let file = l.split_whitespace().last().unwrap().to_owned();
                (file, ms)
            })
            .collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group made for this daemon; no memory is involved.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        self.child.wait().ok();
    }
}

/// Whether a socket listens on 127.0.0.1:`port`, from /proc/net/tcp (no connection is made,
/// so none lands in a daemon's log).
fn listening(port: u16) -> bool {
    // "sl local_address rem_address st ...": 127.0.0.1 and the port in hex, LISTEN is 0A.
    let local = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .any(|l| {
            let mut fields = l.split_whitespace();
            fields.nth(1) == Some(local.as_str()) && fields.nth(1) == Some("0A")
        })
}

/// A TCP port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
