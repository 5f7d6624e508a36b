//! Loading a 100,000-commit range with merges and choosing the first candidate: firstbad
//! against `git bisect start <bad> <good>` on the same repository, side by side.
//!
//! `cargo bench -p firstbad --bench load_range`. The repository is made once with `git
//! fast-import` under the target directory and reused by later runs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use firstbad::history::History;
use firstbad::search::{Bisection, Next};

/// Commits in the generated history.
const COMMITS: usize = 100_000;
/// Timed runs of each side; the median is reported.
const RUNS: usize = 5;

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

/// A kernel-like history: a mainline where ~8% of steps merge a topic branch of 1-3 commits
/// forked up to 30 commits back, one file changed per commit; tagged `good` (the root) and
/// `bad` (the tip). Made once; later runs find the `bad` tag and reuse it.
fn repository() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-load-range-100k");
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
    while parents.len() < COMMITS - 1 {
        let i = parents.len();
        if rng.below(100) < 8 && i + 4 < COMMITS - 1 {
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
    let mut stream = Vec::with_capacity(COMMITS * 200);
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
        .expect("write to vec");
        for (k, p) in ps.iter().enumerate() {
            let verb = if k == 0 { "from" } else { "merge" };
            writeln!(stream, "{verb} :{}", p + 1).expect("write to vec");
        }
        let content = format!("{i}\n");
        write!(
            stream,
            "M 100644 inline f{}/x\ndata {}\n{content}\n",
            i % 64,
            content.len()
        )
        .expect("write to vec");
    }
    writeln!(stream, "reset refs/tags/good\nfrom :1\n").expect("write to vec");
    writeln!(stream, "reset refs/tags/bad\nfrom :{COMMITS}\n").expect("write to vec");
    let mut child = git(&dir)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import starts");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(&stream)
        .expect("fast-import reads");
    assert!(child.wait().expect("fast-import ends").success());
    eprintln!(
        "made {} ({COMMITS} commits) in {:.1} s",
        dir.display(),
        t.elapsed().as_secs_f64()
    );
    dir
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = repository();
    let bad = git_out(&dir, &["rev-parse", "bad^{commit}"]);
    let good = git_out(&dir, &["rev-parse", "good^{commit}"]);

    let mut ours = Vec::new();
    let mut our_choice = String::new();
    let mut candidates = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let history = History::open(&dir).expect("open");
        let dag = history.load_range("bad", &["good"]).expect("range");
        let b = Bisection::new(&dag, &bad, &[&good]).expect("start");
        let Next::Test(first) = b.next() else {
            panic!("a 100,000-commit range has something to test")
        };
        ours.push(t.elapsed());
        our_choice = first;
        candidates = b.remaining();
    }

    let mut theirs = Vec::new();
    let mut git_choice = String::new();
    for _ in 0..RUNS {
        let _ = git(&dir).args(["bisect", "reset"]).output();
        let t = Instant::now();
        git_out(&dir, &["bisect", "start", "--no-checkout", "bad", "good"]);
        theirs.push(t.elapsed());
        git_choice = git_out(&dir, &["rev-parse", "BISECT_HEAD"]);
        git_out(&dir, &["bisect", "reset"]);
    }

    let (o, g) = (median(ours.clone()), median(theirs.clone()));
    println!(
        "range: {candidates} candidates, merges included ({})",
        dir.display()
    );
    println!("median of {RUNS} runs          firstbad    git bisect start");
    println!(
        "load + first candidate   {:>9.3} s  {:>12.3} s",
        o.as_secs_f64(),
        g.as_secs_f64()
    );
    println!(
        "fastest                  {:>9.3} s  {:>12.3} s",
        ours.iter().min().expect("runs").as_secs_f64(),
        theirs.iter().min().expect("runs").as_secs_f64()
    );
    println!(
        "first candidate          {}  {}",
        &our_choice[..12],
        &git_choice[..12]
    );
    assert_eq!(
        our_choice, git_choice,
        "firstbad and git chose different commits"
    );
}
