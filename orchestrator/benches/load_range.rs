//! Loading a kernel-sized range with merges and choosing the first candidate: firstbad against
//! `git bisect start --no-checkout <bad> <good>` on the same repository, with and without a
//! commit-graph file, time and peak memory side by side (issues 3 and 24).
//!
//! `cargo bench -p firstbad --bench load_range`; sizes and limits from the environment:
//!
//! - `FIRSTBAD_BENCH_COMMITS=100000,300000,1200000` (default `100000`): one repository each,
//!   made once with `git fast-import` under the target directory and reused by later runs;
//! - `FIRSTBAD_BENCH_GIT_TIMEOUT=900` (seconds, default 900): git is killed past it and
//!   reported as `> N s`; `0` leaves git out (firstbad's figures alone);
//! - `FIRSTBAD_BENCH_RUNS=3` (default 3): timed runs of firstbad per repository, the median
//!   reported; git runs once per size (it takes minutes on the large ones).
//!
//! Each side runs as a child process (firstbad as this binary with `--ours`), so that its peak
//! resident memory is measured alone (`wait4`'s `ru_maxrss`). firstbad then bisects to a fixed
//! culprit and reports the time of each later verdict (`mark` + `next`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use firstbad::history::History;
use firstbad::search::{Bisection, Next, Verdict};

/// xorshift64*, seeded: the same repository on every machine.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
    }
}

fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::null());
    c
}

fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = git(dir).args(args).output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A kernel-like history of `commits` commits: a mainline where ~8% of steps merge a topic
/// branch of 1-3 commits forked up to 30 commits back, one file changed per commit; tagged
/// `good` (the root) and `bad` (the tip). Made once; later runs find the `bad` tag and reuse it.
fn repository(commits: usize) -> PathBuf {
    let name = if commits == 100_000 {
        // The name issue 3's figures were measured in.
        "bench-load-range-100k".to_string()
    } else {
        format!("bench-load-range-{commits}")
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    if dir.join(".git").is_dir()
        && git(&dir)
            .args(["rev-parse", "-q", "--verify", "refs/tags/bad"])
            .output()
            .is_ok_and(|o| o.status.success())
    {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create repo dir");
    git_out(&dir, &["init", "-q", "-b", "main"]);
    let t = Instant::now();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut parents: Vec<Vec<usize>> = vec![vec![]];
    let mut main = 0usize;
    while parents.len() < commits - 1 {
        let i = parents.len();
        if rng.below(100) < 8 && i + 4 < commits - 1 {
            let base = main.saturating_sub(rng.below(30));
            let len = 1 + rng.below(3);
            let mut tip = base;
            for k in 0..len {
                parents.push(vec![tip]);
                tip = i + k;
            }
            parents.push(vec![main, tip]);
            main = parents.len() - 1;
        } else {
            parents.push(vec![main]);
            main = i;
        }
    }
    parents.push(vec![main]);
    let mut child = git(&dir)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import starts");
    let mut stream = std::io::BufWriter::new(child.stdin.take().expect("piped"));
    for (i, ps) in parents.iter().enumerate() {
        let when = 1_000_000_000 + 60 * i as i64;
        let msg = format!("commit {i}\n");
        write!(
            stream,
            "commit refs/heads/main\nmark :{}\nauthor A <a@example.org> {when} +0000\n\
             committer C <c@example.org> {when} +0000\ndata {}\n{msg}",
            i + 1,
            msg.len()
        )
        .expect("fast-import reads");
        for (k, p) in ps.iter().enumerate() {
            let verb = if k == 0 { "from" } else { "merge" };
            writeln!(stream, "{verb} :{}", p + 1).expect("fast-import reads");
        }
        let content = format!("{i}\n");
        write!(
            stream,
            "M 100644 inline f{}/x\ndata {}\n{content}\n",
            i % 64,
            content.len()
        )
        .expect("fast-import reads");
    }
    writeln!(stream, "reset refs/tags/good\nfrom :1\n").expect("fast-import reads");
    writeln!(stream, "reset refs/tags/bad\nfrom :{commits}\n").expect("fast-import reads");
    drop(stream);
    assert!(child.wait().expect("fast-import ends").success());
    eprintln!(
        "made {} ({commits} commits) in {:.1} s",
        dir.display(),
        t.elapsed().as_secs_f64()
    );
    dir
}

/// How a child process ended: wall time, peak resident memory, and whether it was killed.
struct Measured {
    wall: Duration,
    /// User plus system CPU time: on a shared machine, what the work cost.
    cpu: Duration,
    max_rss_kib: i64,
    timed_out: bool,
    stdout: String,
}

/// Runs `cmd` to its end or `timeout`, measuring its wall time and peak resident memory.
// The child is reaped by `wait4`, which also gives its rusage; `Child::wait` cannot.
#[allow(clippy::zombie_processes)]
fn measure(mut cmd: Command, timeout: Duration) -> Measured {
    let out_path = std::env::temp_dir().join(format!("load-range-{}.out", std::process::id()));
    let out = std::fs::File::create(&out_path).expect("create output file");
    let t = Instant::now();
    let child = cmd
        .stdout(out)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("child starts");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut timed_out = false;
    loop {
        // SAFETY: waits for our own child; the pointers outlive the call.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4 failed: {}", std::io::Error::last_os_error());
        if !timed_out && t.elapsed() > timeout {
            // SAFETY: signals our own child, which has not been reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            timed_out = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let wall = t.elapsed();
    assert!(
        timed_out || (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0),
        "{cmd:?} failed: status {status}"
    );
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Measured {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        max_rss_kib: usage.ru_maxrss,
        timed_out,
        stdout,
    }
}

/// `--ours <dir>`: load, first choice, then a bisection to a fixed culprit; one line each.
fn ours(dir: &Path) {
    let t = Instant::now();
    let history = History::open(dir).expect("open");
    let dag = history.load_range("bad", &["good"]).expect("range");
    let loaded = t.elapsed();
    let bad = dag.id(0).to_string();
    let good = history.resolve("good").expect("good tag");
    let mut b = Bisection::new(&dag, &bad, &[&good]).expect("start");
    let Next::Test(first) = b.next() else {
        panic!("a range of {} commits has something to test", dag.len())
    };
    let chosen = t.elapsed();
    println!(
        "first {first} load {:.3} total {:.3} candidates {}",
        loaded.as_secs_f64(),
        chosen.as_secs_f64(),
        b.remaining()
    );
    // The culprit a third of the way down the topological order; a commit is bad iff it
    // reaches the culprit. Children come before parents, so one backward pass marks them.
    let culprit = dag.len() / 3;
    let mut bad_set = vec![false; dag.len()];
    for i in (0..=culprit).rev() {
        bad_set[i] = i == culprit || dag.parents_of(i).any(|p| bad_set[p]);
    }
    let mut next = Next::Test(first);
    let mut times = Vec::new();
    while let Next::Test(id) = next {
        let i = dag.index_of(&id).expect("tested commit is in the range");
        let verdict = if bad_set[i] {
            Verdict::Bad
        } else {
            Verdict::Good
        };
        let t = Instant::now();
        b.mark(&id, verdict).expect("consistent verdict");
        next = b.next();
        times.push(t.elapsed());
    }
    assert_eq!(next, Next::Found(dag.id(culprit).to_string()));
    let max = times.iter().max().expect("at least one verdict");
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    println!(
        "verdicts {} max {:.3} mean {:.3}",
        times.len(),
        max.as_secs_f64(),
        mean.as_secs_f64()
    );
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// Removes or writes the commit-graph file git (and libgit2) read to speed the walk up.
fn commit_graph(dir: &Path, present: bool) {
    let info = dir.join(".git/objects/info");
    let _ = std::fs::remove_file(info.join("commit-graph"));
    let _ = std::fs::remove_dir_all(info.join("commit-graphs"));
    if present {
        git_out(dir, &["commit-graph", "write", "--reachable"]);
    }
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == name {
            return words.next().expect("a value follows");
        }
    }
    panic!("no {name} in {line:?}")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--ours") {
        ours(Path::new(&args[pos + 1]));
        return;
    }
    let sizes: Vec<usize> = env_or("FIRSTBAD_BENCH_COMMITS", "100000")
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("FIRSTBAD_BENCH_COMMITS: commit counts")
        })
        .collect();
    let timeout = Duration::from_secs(
        env_or("FIRSTBAD_BENCH_GIT_TIMEOUT", "900")
            .parse()
            .expect("FIRSTBAD_BENCH_GIT_TIMEOUT: seconds"),
    );
    let runs: usize = env_or("FIRSTBAD_BENCH_RUNS", "3")
        .parse()
        .expect("FIRSTBAD_BENCH_RUNS: a count");
    let me = std::env::current_exe().expect("own path");
    let mut table = vec![
        "| commits | commit-graph | firstbad load | firstbad first choice | firstbad CPU | \
         firstbad peak RSS | later verdicts (max / mean) | `git bisect start` | git CPU | \
         git peak RSS | same choice |"
            .to_string(),
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|".to_string(),
    ];
    for &n in &sizes {
        let dir = repository(n);
        for graph in [false, true] {
            commit_graph(&dir, graph);
            let mut ours_runs: Vec<(Measured, String)> = (0..runs.max(1))
                .map(|_| {
                    let mut cmd = Command::new(&me);
                    cmd.arg("--ours").arg(&dir);
                    let m = measure(cmd, Duration::from_secs(86_400));
                    let line = m.stdout.lines().next().unwrap_or_default().to_string();
                    (m, line)
                })
                .collect();
            ours_runs.sort_by(|a, b| {
                let t = |r: &(Measured, String)| field(&r.1, "total").parse::<f64>().unwrap_or(0.0);
                t(a).total_cmp(&t(b))
            });
            let (ours_m, ours_line) = &ours_runs[ours_runs.len() / 2];
            let verdicts = ours_m.stdout.lines().nth(1).unwrap_or_default();
            let our_choice = field(ours_line, "first").to_string();

            if timeout.is_zero() {
                let row = format!(
                    "| {n} | {} | {} s | {} s (wall {:.2} s) | {:.2} s | {} MiB | {} s / {} s | \
                     not run | | | `{}` |",
                    if graph { "yes" } else { "no" },
                    field(ours_line, "load"),
                    field(ours_line, "total"),
                    ours_m.wall.as_secs_f64(),
                    ours_m.cpu.as_secs_f64(),
                    ours_m.max_rss_kib / 1024,
                    field(verdicts, "max"),
                    field(verdicts, "mean"),
                    &our_choice[..12],
                );
                println!("{row}");
                table.push(row);
                continue;
            }
            let _ = git(&dir).args(["bisect", "reset"]).output();
            let mut cmd = git(&dir);
            cmd.args(["bisect", "start", "--no-checkout", "bad", "good"]);
            let g = measure(cmd, timeout);
            let git_choice = if g.timed_out {
                None
            } else {
                Some(git_out(&dir, &["rev-parse", "BISECT_HEAD"]))
            };
            let _ = git(&dir).args(["bisect", "reset"]).output();
            let git_time = if g.timed_out {
                format!("> {} s", timeout.as_secs())
            } else {
                format!("{:.2} s", g.wall.as_secs_f64())
            };
            let same = match &git_choice {
                Some(c) if *c == our_choice => "yes".to_string(),
                Some(c) => format!("**no** (git {})", &c[..12]),
                None => "git did not finish".to_string(),
            };
            let row = format!(
                "| {n} | {} | {} s | {} s (wall {:.2} s) | {:.2} s | {} MiB | {} s / {} s | \
                 {git_time} | {:.2} s | {} MiB{} | {same} `{}` |",
                if graph { "yes" } else { "no" },
                field(ours_line, "load"),
                field(ours_line, "total"),
                ours_m.wall.as_secs_f64(),
                ours_m.cpu.as_secs_f64(),
                ours_m.max_rss_kib / 1024,
                field(verdicts, "max"),
                field(verdicts, "mean"),
                g.cpu.as_secs_f64(),
                g.max_rss_kib / 1024,
                if g.timed_out { " (when killed)" } else { "" },
                &our_choice[..12],
            );
            println!("{row}");
            table.push(row);
            if let Some(c) = git_choice {
                assert_eq!(c, our_choice, "firstbad and git chose different commits");
            }
        }
    }
    println!("\n{}", table.join("\n"));
}
