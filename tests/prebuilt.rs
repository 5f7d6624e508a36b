//! Prebuilt Debian kernels as candidates, on real parts (issue 22): the cloud kernels that
//! Debian 12's archive has today, found with apt-cache, fetched with `apt-get download` and
//! unpacked (never installed), each booted once under qemu (TCG) through `firstbad try` with
//! the static agent, and verified by its own `uname -r`.
//!
//! Needs the Debian mirror the first time; the packages and unpacked kernels are cached under
//! $FIRSTBAD_CACHE/builds/prebuilt (default ~/.cache/firstbad), so later runs download
//! nothing. Which kernels: the two newest 6.1 and the newest 6.12 that apt can fetch.
//!
//! `firstbad reproduce` between the newest 6.1 and the newest 6.12 runs on fsync latency and on
//! buffered sequential reads, at most 8 boots a side (`classify.max_baseline_boots`): these are
//! real kernels nobody here wrote, so the test asserts that it decided (exit 0 or 3) and what
//! the report holds, not which way it went; the figures are in docs/reproduce.md.

mod common;

use common::agent;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.env("LC_ALL", "C").output().expect("the tool runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Packages whose names match `pattern` (apt-cache search) and that apt can fetch (a
/// candidate version), as (sort key, name), newest last.
fn packages(pattern: &str, key: impl Fn(&str) -> Option<Vec<u32>>) -> Vec<(Vec<u32>, String)> {
    let list = stdout(Command::new("apt-cache").args(["search", "--names-only", pattern]));
    let mut found: Vec<(Vec<u32>, String)> = list
        .lines()
        .filter_map(|l| l.split(" - ").next())
        .filter_map(|name| Some((key(name)?, name.to_owned())))
        .filter(|(_, name)| {
            let policy = stdout(Command::new("apt-cache").args(["policy", name]));
            policy
                .lines()
                .any(|l| l.trim().starts_with("Candidate:") && !l.contains("(none)"))
        })
        .collect();
    found.sort();
    found
}

fn numbers(s: &str) -> Vec<u32> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The newest 6.1 and the newest 6.12 cloud kernels that apt can fetch.
fn debian_kernels() -> (Vec<String>, String) {
    let v61 = packages(r"^linux-image-6\.1\.0-[0-9]+-cloud-amd64$", |n| {
        Some(numbers(n.strip_prefix("linux-image-6.1.0-")?))
    });
    let v612 = packages(r"^linux-image-6\.12\.[0-9]+\+deb12-cloud-amd64$", |n| {
        Some(numbers(n.strip_prefix("linux-image-6.12.")?))
    });
    assert!(!v61.is_empty(), "apt knows no 6.1 cloud kernel");
    let newest = v612
        .last()
        .unwrap_or_else(|| panic!("apt knows no 6.12 cloud kernel"))
        .1
        .clone();
    (v61.into_iter().map(|(_, n)| n).collect(), newest)
}

/// A hunt file over prebuilt `kernels` on one TCG qemu VM, measuring `metric` of the
/// workload file `workload` (a path), with `extra` appended (a `[classify]` table).
fn prebuilt_hunt(
    dir: &Path,
    kernels: &[String],
    workload: &Path,
    metric: &str,
    extra: &str,
) -> PathBuf {
    let list = kernels
        .iter()
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let hunt = dir.join("hunt.toml");
    std::fs::write(
        &hunt,
        format!(
            "[hunt]\nname = \"debian-cloud\"\nstate_dir = \"state\"\n\n[build]\nkind = \"prebuilt\"\nkernels = [{list}]\n\n\
             [[hosts]]\nname = \"qemu0\"\nkind = \"qemu\"\naccel = \"tcg\"\nmemory_mb = 1024\n\
             boot_timeout_s = 240\nscratch_mb = 512\n\n\
             [workload]\nfile = {workload:?}\nmetric = {metric:?}\n{extra}"
        ),
    )
    .unwrap();
    hunt
}

/// Issue 22 item 4: "Run `firstbad reproduce` between 6.1 and 6.12 on fsync-latency and on
/// buffered sequential reads. The test asserts exit 0 or 3, the report's sections and its
/// per-boot samples".
#[test]
fn reproduce_debian_6_1_against_6_12_on_fsync_latency_and_buffered_reads() {
    let (v61, v612) = debian_kernels();
    let kernels = [v61.last().unwrap().clone(), v612];
    let dir = tempfile::tempdir().unwrap();
    let reads = dir.path().join("buffered-reads.toml");
    // Buffered reads of a 128 MiB file in the guest's scratch, page cache dropped first.
    std::fs::write(
        &reads,
        "kind = \"sequential\"\nop = \"read\"\nblock_bytes = 1048576\nbytes = 134217728\n\
         direct = false\ndrop_caches = true\n",
    )
    .unwrap();
    let fsync = common::root().join("workloads/fsync-latency.toml");
    let agent = agent();
    for (name, workload, metric) in [
        ("fsync", fsync.as_path(), "fsync_latency_p50_ms"),
        ("reads", reads.as_path(), "mb_s"),
    ] {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        let hunt = prebuilt_hunt(
            &sub,
            &kernels,
            workload,
            metric,
            "\n[classify]\nmax_baseline_boots = 8\n",
        );
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_firstbad"))
            .env("FIRSTBAD_AGENT", agent)
            .arg("reproduce")
            .arg(&hunt)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{name}: {}\n{stdout}\n{stderr}",
            out.status
        );
        eprintln!(
            "{name}: firstbad reproduce {} -> {} exited {} in {:.0} s\n{stdout}",
            kernels[0],
            kernels[1],
            out.status,
            started.elapsed().as_secs_f64()
        );
        let releases = kernels
            .each_ref()
            .map(|k| k.strip_prefix("linux-image-").unwrap());
        for section in [
            metric,
            "95% percentile-bootstrap intervals",
            "Confidence:",
            "boots x samples per boot",
            "The workload (",
            releases[0],
            releases[1],
        ] {
            assert!(
                stdout.contains(section),
                "{name}: {section:?} in:\n{stdout}"
            );
        }
        // A report that reproduced nothing is not headed as a regression.
        if out.status.code() == Some(3) {
            assert!(
                stdout.contains("[NOT REPRODUCED]") && !stdout.contains("regressed between"),
                "{name}:\n{stdout}"
            );
        }
        // Every boot's samples are in the journal, 5 or 8 boots a side (the baselines' looks up
        // to max_baseline_boots; 5 decides only a regression of Δ/σ ≥ 6), each verified by
        // the release it reported.
        let events = common::journal_events(&sub.join("state/reproduce"));
        let boots: Vec<&serde_json::Value> = events
            .iter()
            .filter(|(k, _, _)| k == "boot-finished")
            .map(|(_, _, v)| v)
            .collect();
        // A measured boot carries the agent's result; its series hold every sample.
        let measured: Vec<&serde_json::Value> = boots
            .iter()
            .filter_map(|b| b["outcome"].get("result"))
            .collect();
        assert!(
            matches!(measured.len(), 10 | 16),
            "{name}: {} boots: {boots:?}",
            measured.len()
        );
        for r in &measured {
            let samples = r["series"]
                .as_object()
                .into_iter()
                .flat_map(|s| s.values())
                .filter_map(|s| s["samples"].as_array())
                .map(Vec::len)
                .sum::<usize>();
            assert!(samples > 0, "{name}: a boot without its samples: {r}");
        }
        let html = std::fs::read_to_string(sub.join("state/reproduce/report.html")).unwrap();
        assert!(
            html.contains("<svg") && html.contains("Kernels compared"),
            "{name}"
        );
        assert!(html.contains("Test-host settings that differ"), "{name}");
    }
}

/// Issue 22: "Boot at least two Debian 6.1 cloud kernels and a 6.12 one under TCG with the
/// agent, each verified by its release".
#[test]
fn debian_cloud_kernels_boot_under_tcg_each_verified_by_its_release() {
    let (v61, v612) = debian_kernels();
    assert!(
        v61.len() >= 2,
        "apt knows fewer than two 6.1 cloud kernels: {v61:?}"
    );
    let kernels: Vec<String> = v61[v61.len() - 2..].iter().cloned().chain([v612]).collect();

    let dir = tempfile::tempdir().unwrap();
    // A short workload: the point is the boot and the agent's answer, not the number.
    let workload = dir.path().join("workload.toml");
    std::fs::write(
        &workload,
        "kind = \"fsync-latency\"\nwriters = 1\nwriter_bytes = 16777216\n\
         writer_block_bytes = 1048576\nappend_bytes = 4096\nfsyncs = 5\ninterval_ms = 10\n\
         warmup_ms = 100\n",
    )
    .unwrap();
    let hunt = prebuilt_hunt(dir.path(), &kernels, &workload, "fsync_latency_p50_ms", "");
    let agent = agent();
    for k in &kernels {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_firstbad"))
            .env("FIRSTBAD_AGENT", agent)
            .arg("try")
            .arg(&hunt)
            .arg(k)
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "firstbad try {k}: {}\n{text}",
            out.status
        );
        let (build, boot) = text
            .strip_prefix("build: ")
            .and_then(|t| t.split_once("\nboot: "))
            .unwrap_or_else(|| panic!("firstbad try {k} printed no boot:\n{text}"));
        let build: serde_json::Value = serde_json::from_str(build).unwrap();
        let boot: serde_json::Value = serde_json::from_str(boot).unwrap();
        let release = k.strip_prefix("linux-image-").unwrap();
        assert_eq!(build["kernel_release"], release, "{k}: {build}");
        assert_eq!(boot["status"], "measured", "{k}: {boot}");
        // The agent in the guest answered, from the kernel that was asked for.
        assert_eq!(boot["kernel_release"], release, "{k}: {boot}");
        assert!(
            boot["value"].as_f64().is_some_and(f64::is_finite),
            "{k}: {boot}"
        );
        eprintln!(
            "{k}: booted to the agent in {:.1} s, `firstbad try` {:.1} s (fetch and unpack \
             {:.1} s)",
            boot["boot_seconds"].as_f64().unwrap_or(f64::NAN),
            started.elapsed().as_secs_f64(),
            build["seconds"].as_f64().unwrap_or(f64::NAN),
        );
    }
}
