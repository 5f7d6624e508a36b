//! Clean build times of one directory of the demo tree with 0, 1 and 2 local distccd
//! daemons, through the product's make path (`Builder::make_targets`), and each object's
//! compile time from the daemons' job summaries (docs/distcc.md).
//!
//! ```text
//! cargo run -p firstbad --example distcc_times -- [DIR [REPEATS]]   # default fs/ext4/ 2
//! cargo run -p firstbad --example distcc_times -- bzImage 1          # a whole clean kernel
//! cargo run -p firstbad --example distcc_times -- bzImage 1 4 0      # -j4, no daemon
//! ```
//!
//! A third argument sets make's -j for every row (default: the product's rule, CPUs plus
//! slots); a fourth, the daemon counts to time, comma-separated (default 0,1,2).
//!
//! A target that is not a directory (`bzImage`) is built from an empty build directory,
//! `olddefconfig` and `make prepare` included, and without the serial calibration.
//!
//! Runs from the top of the firstbad tree after the distcc tests (tests/distcc.rs), whose
//! cache it shares, so the demo tree is checked out and prepared already.

#[allow(dead_code)]
#[path = "../../tests/common/distccd.rs"]
mod distccd;

use distccd::Daemon;
use firstbad::build::Builder;
use firstbad::config::{BuildConfig, Ccache, DistccHost};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let part = args.next().unwrap_or_else(|| "fs/ext4/".into());
    let repeats: usize = args
        .next()
        .map_or(2, |r| r.parse().expect("REPEATS is a number"));
    let fixed_jobs: Option<u32> = args.next().map(|j| j.parse().expect("JOBS is a number"));
    let counts: Vec<usize> = args.next().map_or(vec![0, 1, 2], |c| {
        c.split(',')
            .map(|n| n.parse().expect("DAEMONS is a list of numbers"))
            .collect()
    });
    let tree = demo_tree();
    let out = Command::new("git")
        .arg("-C")
        .arg(&tree)
        .args(["rev-parse", "demo-good^{commit}"])
        .output()
        .expect("git runs");
    let commit = String::from_utf8(out.stdout)
        .expect("hex")
        .trim()
        .to_owned();
    let logs = tempfile::tempdir().expect("a temporary directory");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    println!("| daemons | make -j | clean `make {part}` (s) | objects compiled on daemons |");
    println!("|---|---|---|---|");
    // A daemon takes as many compiles as the machine has CPUs, the local CPUs preprocess.
    for daemons in counts {
        for r in 0..repeats {
            let ds: Vec<Daemon> = (0..daemons)
                .map(|i| Daemon::start(logs.path(), &format!("d{daemons}-{r}-{i}"), cpus))
                .collect();
            let hosts: Vec<DistccHost> = ds.iter().map(|d| d.host(cpus)).collect();
            let (seconds, jobs) =
                time_part(&tree, &commit, &part, hosts, fixed_jobs, true, logs.path());
            let remote: usize = ds.iter().map(|d| d.jobs().len()).sum();
            println!("| {daemons} | {jobs} | {seconds:.1} | {remote} |");
        }
    }
    if !part.ends_with('/') {
        return;
    }
    // Calibration: one compile at a time on one daemon (make -j1), so that each job summary
    // is one object's compile time without contention, and the rest of the wall time is the
    // work that stays on the machine running make (preprocessing, objtool, archiving, make).
    let d = Daemon::start(logs.path(), "serial", 1);
    let (serial, _) = time_part(
        &tree,
        &commit,
        &part,
        vec![d.host(1)],
        Some(1),
        true,
        logs.path(),
    );
    // What every build pays whatever it compiles: the checkout, olddefconfig, make's walk.
    let (noop, _) = time_part(
        &tree,
        &commit,
        &part,
        vec![d.host(1)],
        Some(1),
        false,
        logs.path(),
    );
    let jobs = d.jobs();
    let compile_ms: u64 = jobs.iter().map(|(_, ms)| ms).sum();
    let longest = jobs.iter().map(|(_, ms)| *ms).max().unwrap_or(0);
    println!();
    println!(
        "serial (-j1, one daemon taking 1): {serial:.1} s wall; {} objects compiled remotely in {:.1} s \
         (mean {:.0} ms, longest {} ms); {:.1} s stays local",
        jobs.len(),
        compile_ms as f64 / 1000.0,
        compile_ms as f64 / jobs.len().max(1) as f64,
        longest,
        serial - compile_ms as f64 / 1000.0,
    );
    println!("nothing to compile (the same call again): {noop:.1} s");
}

/// The demo tree, made (or found) by scripts/make-demo-tree.
fn demo_tree() -> PathBuf {
    let out = Command::new("scripts/make-demo-tree")
        .output()
        .expect("run from the top of the firstbad tree: scripts/make-demo-tree");
    assert!(out.status.success(), "make-demo-tree failed");
    let text = String::from_utf8(out.stdout).expect("a path");
    PathBuf::from(
        text.lines()
            .last()
            .expect("make-demo-tree prints the path")
            .trim(),
    )
}

/// One build of `part` with these hosts, `clean` (its objects removed first) or not (nothing
/// to compile): seconds and -j.
fn time_part(
    tree: &Path,
    commit: &str,
    part: &str,
    distcc: Vec<DistccHost>,
    jobs: Option<u32>,
    clean: bool,
    logs: &Path,
) -> (f64, u32) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let jobs = jobs.unwrap_or(cpus + distcc.iter().map(|h| h.slots).sum::<u32>());
    let cfg = BuildConfig {
        kernel_config: PathBuf::from("configs/kernel/qemu-x86_64.config")
            .canonicalize()
            .expect("run from the top of the firstbad tree"),
        cache_dir: firstbad::config::default_cache_dir().join("distcc-tests"),
        jobs,
        ccache: Ccache::Off,
        distcc,
        make_args: vec![],
        timeout_s: 3600,
        prune: true,
    };
    let b = Builder::new(tree, &cfg).expect("a builder");
    let dir = if part.ends_with('/') {
        b.build_dir().join(part)
    } else {
        b.build_dir()
    };
    if clean && dir.exists() {
        std::fs::remove_dir_all(&dir).expect("removing the directory's objects");
    }
    let started = Instant::now();
    let log = logs.join("make.log");
    if let Err(failed) = b.make_targets(commit, &[part], &log).expect("make runs") {
        panic!("make {part} failed: {failed:?}");
    }
    (started.elapsed().as_secs_f64(), jobs)
}
