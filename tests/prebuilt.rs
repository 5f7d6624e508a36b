//! Prebuilt Debian kernels as candidates, on real parts (issue 22): the cloud kernels that
//! Debian 12's archive has today, found with apt-cache, fetched with `apt-get download` and
//! unpacked (never installed), each booted once under qemu (TCG) through `firstbad try` with
//! the static agent, and verified by its own `uname -r`.
//!
//! Needs the Debian mirror the first time; the packages and unpacked kernels are cached under
//! $FIRSTBAD_CACHE/builds/prebuilt (default ~/.cache/firstbad), so later runs download
//! nothing. Which kernels: the two newest 6.1 and the newest 6.12 that apt can fetch.

mod common;

use common::agent;
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

/// Issue 22: "Boot at least two Debian 6.1 cloud kernels and a 6.12 one under TCG with the
/// agent, each verified by its release".
#[test]
fn debian_cloud_kernels_boot_under_tcg_each_verified_by_its_release() {
    let v61 = packages(r"^linux-image-6\.1\.0-[0-9]+-cloud-amd64$", |n| {
        Some(numbers(n.strip_prefix("linux-image-6.1.0-")?))
    });
    let v612 = packages(r"^linux-image-6\.12\.[0-9]+\+deb12-cloud-amd64$", |n| {
        Some(numbers(n.strip_prefix("linux-image-6.12.")?))
    });
    assert!(
        v61.len() >= 2,
        "apt knows fewer than two 6.1 cloud kernels: {v61:?}"
    );
    assert!(!v612.is_empty(), "apt knows no 6.12 cloud kernel");
    let kernels: Vec<String> = v61[v61.len() - 2..]
        .iter()
        .chain(v612.last())
        .map(|(_, n)| n.clone())
        .collect();

    let dir = tempfile::tempdir().unwrap();
    // A short workload: the point is the boot and the agent's answer, not the number.
    std::fs::write(
        dir.path().join("workload.toml"),
        "kind = \"fsync-latency\"\nwriters = 1\nwriter_bytes = 16777216\n\
         writer_block_bytes = 1048576\nappend_bytes = 4096\nfsyncs = 5\ninterval_ms = 10\n\
         warmup_ms = 100\n",
    )
    .unwrap();
    let list = kernels
        .iter()
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let hunt = dir.path().join("hunt.toml");
    std::fs::write(
        &hunt,
        format!(
            "[hunt]\nname = \"debian-cloud\"\n\n[build]\nkind = \"prebuilt\"\nkernels = [{list}]\n\n\
             [[hosts]]\nname = \"qemu0\"\nkind = \"qemu\"\naccel = \"tcg\"\nmemory_mb = 1024\n\
             boot_timeout_s = 240\nscratch_mb = 256\n\n\
             [workload]\nfile = \"workload.toml\"\nmetric = \"fsync_latency_p50_ms\"\n"
        ),
    )
    .unwrap();
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
