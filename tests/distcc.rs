//! Distributed kernel builds through distcc (issue 23, item 3), on the demo tree's `fs/ext4/`:
//! two real `distccd` daemons on 127.0.0.1 receive its compiles, a dead host falls back to
//! local compiles, and the objects made through distcc are those made locally, byte for byte.
//!
//! Every build goes through the product's own make path (`Builder::make_targets`, the make
//! invocation `Builder::build` uses), with ccache off so that the daemons get the work.

mod common;

use common::distccd::{free_port, Daemon};
use common::{demo_tree, git, root};
use firstbad::build::Builder;
use firstbad::config::{BuildConfig, Ccache, DistccHost};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The directory whose objects each test builds: 33 objects under the demo config.
const PART: &str = "fs/ext4/";

/// The cache (worktree and build directory) of these tests, kept between runs like the e2e
/// suite's, so that the tree is checked out and prepared once per machine. The tests take
/// turns in it through the builder's own lock on its build directory.
fn cache() -> PathBuf {
    firstbad::config::default_cache_dir().join("distcc-tests")
}

fn demo_good() -> &'static str {
    static COMMIT: OnceLock<String> = OnceLock::new();
    COMMIT.get_or_init(|| git(demo_tree(), &["rev-parse", "demo-good^{commit}"]))
}

fn config(cache: &Path, distcc: Vec<DistccHost>) -> BuildConfig {
    BuildConfig {
        kernel_config: root().join("configs/kernel/qemu-x86_64.config"),
        cache_dir: cache.to_owned(),
        jobs: 2 + distcc.iter().map(|h| h.slots).sum::<u32>(),
        // ccache would answer from its cache and the daemons would get no work.
        ccache: Ccache::Off,
        distcc,
        make_args: vec![],
        timeout_s: 3600,
        prune: true,
    }
}

/// A clean build of `PART` through the product's make path; its objects by name, and the
/// build log. Panics with the root-cause lines when make fails.
fn build_part(
    logs: &Path,
    distcc: Vec<DistccHost>,
    name: &str,
) -> (BTreeMap<String, Vec<u8>>, String) {
    let b = Builder::new(demo_tree(), &config(&cache(), distcc)).unwrap();
    let log = logs.join(format!("{name}.log"));
    // Clean: whatever an earlier test compiled there is made again.
    let part = b.build_dir().join(PART);
    if part.exists() {
        std::fs::remove_dir_all(&part).unwrap();
    }
    let started = Instant::now();
    let build_dir = match b.make_targets(demo_good(), &[PART], &log).unwrap() {
        Ok(d) => d,
        Err(failed) => panic!("make {PART} failed ({name}): {failed:?}"),
    };
    eprintln!(
        "{name}: make {PART} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut objects = BTreeMap::new();
    for e in std::fs::read_dir(build_dir.join(PART)).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "o") {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            objects.insert(n, std::fs::read(&p).unwrap());
        }
    }
    (objects, std::fs::read_to_string(&log).unwrap())
}

/// The objects of `PART` compiled from a C file of the same name (not the ones linked from
/// several, like a composite `ext4.o`).
fn compiled_objects(objects: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let src = demo_tree().join(PART);
    objects
        .keys()
        .filter(|o| src.join(o.replace(".o", ".c")).is_file())
        .cloned()
        .collect()
}

/// The compiles each daemon logged, once they number `want` in all (or 10 s have passed): a
/// daemon logs a compile's summary after it has sent the object back, so the build may end
/// before the last summaries are in the logs.
fn logged_jobs(daemons: &[&Daemon], want: usize) -> Vec<Vec<(String, u64)>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let jobs: Vec<_> = daemons.iter().map(|d| d.jobs()).collect();
        if jobs.iter().map(Vec::len).sum::<usize>() >= want || Instant::now() >= deadline {
            return jobs;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

// Issue 23, item 3: the daemons really get the compiles, counted from their own logs.
#[test]
fn two_distccd_daemons_on_127_0_0_1_compile_the_objects_of_fs_ext4() {
    let logs = tempfile::tempdir().unwrap();
    let a = Daemon::start(logs.path(), "distccd-a", 2);
    let b = Daemon::start(logs.path(), "distccd-b", 2);
    let (objects, log) = build_part(logs.path(), vec![a.host(2), b.host(2)], "two-daemons");
    let compiled = compiled_objects(&objects);
    assert!(
        compiled.len() >= 20,
        "fs/ext4 has some 40 objects: {compiled:?}"
    );
    let [ja, jb]: [Vec<_>; 2] = logged_jobs(&[&a, &b], compiled.len())
        .try_into()
        .expect("two daemons");
    eprintln!(
        "{} objects; daemon a compiled {}, daemon b {}",
        compiled.len(),
        ja.len(),
        jb.len()
    );
    assert!(
        !ja.is_empty() && !jb.is_empty(),
        "each daemon compiles: a {ja:?}, b {jb:?}\n{log}"
    );
    // Every object of fs/ext4 was compiled on one of the daemons, none here.
    let remote: Vec<&str> = ja.iter().chain(&jb).map(|(f, _)| f.as_str()).collect();
    for o in &compiled {
        let c = o.replace(".o", ".c");
        assert!(
            remote
                .iter()
                .any(|f| f.ends_with(&format!("ext4/{c}")) || *f == c),
            "{c} was not compiled on a daemon: {remote:?}"
        );
    }
    assert!(!log.contains("failed to distribute"), "{log}");
}

// Issue 23, item 3: a host nobody listens on slows the build and never fails it.
#[test]
fn a_dead_distcc_host_falls_back_to_local_compiles_and_the_build_succeeds() {
    let logs = tempfile::tempdir().unwrap();
    let dead = DistccHost {
        host: "127.0.0.1".into(),
        port: free_port(),
        slots: 2,
    };
    let (objects, log) = build_part(logs.path(), vec![dead], "dead-host");
    let compiled = compiled_objects(&objects);
    assert!(
        compiled.len() >= 20,
        "fs/ext4 has some 40 objects: {compiled:?}"
    );
    assert!(
        log.contains("running locally instead"),
        "distcc says it fell back:\n{log}"
    );
}

// Issue 23, item 3: distcc does not change what is built, which is why it is in neither the
// kernel cache key nor the toolchain identity.
#[test]
fn objects_compiled_through_distcc_equal_those_compiled_locally_byte_for_byte() {
    let logs = tempfile::tempdir().unwrap();
    let (local, _) = build_part(logs.path(), vec![], "local");
    let a = Daemon::start(logs.path(), "distccd-c", 2);
    let b = Daemon::start(logs.path(), "distccd-d", 2);
    let (remote, log) = build_part(logs.path(), vec![a.host(2), b.host(2)], "distcc");
    let compiled = compiled_objects(&remote);
    assert!(
        compiled.len() >= 20,
        "fs/ext4 has some 40 objects: {compiled:?}"
    );
    let logged: usize = logged_jobs(&[&a, &b], compiled.len())
        .iter()
        .map(Vec::len)
        .sum();
    assert!(
        logged >= compiled.len(),
        "the distcc build's compiles ran on the daemons:\n{log}"
    );
    assert_eq!(
        local.keys().collect::<Vec<_>>(),
        remote.keys().collect::<Vec<_>>(),
        "the same objects"
    );
    let differ: Vec<&String> = local
        .iter()
        .filter(|(name, bytes)| remote[*name] != **bytes)
        .map(|(name, _)| name)
        .collect();
    assert!(differ.is_empty(), "objects that differ: {differ:?}");
}
