use super::expand::expand;
use super::*;
use firstbad_wire::Workload;
use std::path::{Path, PathBuf};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn fixture(dir: &Path, hunt_extra: &str) -> PathBuf {
    write(dir, "kernel.config", "CONFIG_64BIT=y\n");
    write(
        dir,
        "fsync.toml",
        "kind = \"fsync-latency\"\nwriters = 1\nwriter_bytes = 1048576\nwriter_block_bytes = 65536\nappend_bytes = 4096\nfsyncs = 10\ninterval_ms = 0\n",
    );
    write(
        dir,
        "hunt.toml",
        &format!(
            "[hunt]\nname = \"t\"\nrepo = \"linux\"\ngood = \"v1\"\nbad = \"v2\"\n\n[build]\nconfig = \"kernel.config\"\n\n[[hosts]]\nkind = \"qemu\"\n{hunt_extra}\n[workload]\nfile = \"fsync.toml\"\nmetric = \"fsync_latency_p50_ms\"\n"
        ),
    )
}

#[test]
fn a_good_file_validates_with_paths_relative_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let c = HuntConfig::load(&p).unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(c.repo, base.join("linux"));
    assert_eq!(c.state_dir, base.join("firstbad-state/t"));
    assert_eq!(c.hosts[0].name, "qemu0");
    assert!(matches!(c.workload.workload, Workload::FsyncLatency(ref f) if f.fsyncs == 10));
}

#[test]
fn unknown_field_names_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "memroy_mb = 512\n");
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("hunt.toml"), "{e}");
    assert!(e.contains("memroy_mb"), "{e}");
}

#[test]
fn bad_value_names_the_field_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "accel = \"hvf\"\n");
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("hosts[0].accel"), "{e}");
    assert!(e.contains("\"tcg\""), "{e}");
}

#[test]
fn unknown_metric_lists_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("fsync_latency_p50_ms", "fsync_p50");
    std::fs::write(&p, text).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("workload.metric"), "{e}");
    assert!(e.contains("fsync_latency_p99_ms"), "{e}");
}

#[test]
fn report_table_is_optional_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    assert!(HuntConfig::load(&p).unwrap().report.web_link.is_none());
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(
        &p,
        format!(
            "{text}\n[report]\nweb_link = \"https://x/c/{{commit}}\"\nbisected_by = \"A <a@b>\"\n"
        ),
    )
    .unwrap();
    let c = HuntConfig::load(&p).unwrap();
    assert_eq!(c.report.bisected_by.as_deref(), Some("A <a@b>"));
    std::fs::write(&p, format!("{text}\n[report]\nweb_link = \"https://x/\"\n")).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("report.web_link"), "{e}");
    std::fs::write(&p, format!("{text}\n[report]\nreportd_by = \"x\"\n")).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("reportd_by"), "{e}");
    // Closes: takes the bug's link, as checkpatch.pl wants.
    std::fs::write(&p, format!("{text}\n[report]\ncloses = \"bug 12309\"\n")).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("report.closes") && e.contains("is not a link"),
        "{e}"
    );
    let url = "https://bugzilla.kernel.org/show_bug.cgi?id=12309";
    std::fs::write(&p, format!("{text}\n[report]\ncloses = \"{url}\"\n")).unwrap();
    assert_eq!(
        HuntConfig::load(&p).unwrap().report.closes.as_deref(),
        Some(url)
    );
}

#[test]
fn classify_modes_are_checked_with_the_fix_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let text = std::fs::read_to_string(&p).unwrap();
    let with = |classify: &str| {
        std::fs::write(&p, format!("{text}\n[classify]\n{classify}\n")).unwrap();
        HuntConfig::load(&p)
    };
    let c = with("").unwrap().classify;
    assert_eq!(c.mode, ClassifyMode::Baselines);
    assert_eq!((c.alpha, c.beta, c.confidence), (0.01, 0.01, 0.95));
    assert_eq!((c.drift_check_every, c.confirm_pairs), (4, 3));
    let c = with("mode = \"relative\"\nrelative = 0.2")
        .unwrap()
        .classify;
    assert_eq!(c.mode, ClassifyMode::Relative(0.2));
    let c = with("mode = \"absolute\"\nthreshold = 500.0")
        .unwrap()
        .classify;
    assert_eq!(c.mode, ClassifyMode::Absolute(500.0));
    for (bad, field, hint) in [
        ("mode = \"relative\"", "classify.relative", "0.2 means"),
        ("mode = \"absolute\"", "classify.threshold", "500.0"),
        (
            "threshold = 5.0",
            "classify.threshold",
            "mode = \"absolute\"",
        ),
        ("mode = \"vote\"", "classify.mode", "\"relative\""),
        ("baseline_boots = 3", "classify.baseline_boots", "remove it"),
    ] {
        let e = with(bad).unwrap_err().to_string();
        assert!(e.contains(field) && e.contains(hint), "{bad}: {e}");
    }
}

#[test]
fn range_options_one_or_several_goods_paths_first_parent() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let c = HuntConfig::load(&p).unwrap();
    assert_eq!(c.goods, ["v1"]);
    assert!(c.paths.is_empty() && !c.first_parent);
    let text = std::fs::read_to_string(&p).unwrap().replace(
        "good = \"v1\"\n",
        "good = [\"v1\", \"v0.9\"]\npaths = [\"mm/\", \"fs/ext4/\"]\nfirst_parent = true\n",
    );
    std::fs::write(&p, &text).unwrap();
    let c = HuntConfig::load(&p).unwrap();
    assert_eq!(c.goods, ["v1", "v0.9"]);
    assert_eq!(c.paths, ["mm/", "fs/ext4/"]);
    assert!(c.first_parent);
    std::fs::write(&p, text.replace("\"fs/ext4/\"", "\"fs/*.c\"")).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("hunt.paths[1]") && e.contains("wildcards"),
        "{e}"
    );
    std::fs::write(&p, text.replace("[\"v1\", \"v0.9\"]", "[]")).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("hunt.good") && e.contains("at least one"), "{e}");
}

#[test]
fn a_test_table_makes_a_local_command_hunt_without_kernel_tables() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[hunt]\nname = \"l\"\nrepo = \"r\"\ngood = \"v1\"\nbad = \"v2\"\n\n[test]\ncommand = \"make -s check\"\njobs = 3\n";
    let p = write(dir.path(), "hunt.toml", text);
    let HuntFile::Local(c) = HuntFile::load(&p).unwrap() else {
        panic!("not a local hunt")
    };
    assert_eq!(c.test.command, "make -s check");
    assert_eq!((c.test.jobs, c.test.timeout_s), (3, 3600));
    // HuntConfig (kernel hunts) refuses it, naming the table.
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains(": test:"), "{e}");
    // Mixing it with a kernel table is an error that names the table.
    write(
        dir.path(),
        "hunt.toml",
        &format!("{text}\n[build]\nconfig = \"k\"\n"),
    );
    let e = HuntFile::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("hunt.toml: build:") && e.contains("[test]"),
        "{e}"
    );
    write(
        dir.path(),
        "hunt.toml",
        &text.replace("jobs = 3", "jobs = 0"),
    );
    let e = HuntFile::load(&p).unwrap_err().to_string();
    assert!(e.contains("test.jobs"), "{e}");
    write(
        dir.path(),
        "hunt.toml",
        &text.replace("jobs = 3", "job = 3"),
    );
    let e = HuntFile::load(&p).unwrap_err().to_string();
    assert!(e.contains("job"), "{e}");
    // Neither [test] nor [build]: the message says both ways.
    write(
        dir.path(),
        "hunt.toml",
        text.split("[test]").next().unwrap(),
    );
    let e = HuntFile::load(&p).unwrap_err().to_string();
    assert!(e.contains("build: missing") && e.contains("[test]"), "{e}");
}

#[test]
fn an_ssh_host_validates_and_its_errors_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let text = std::fs::read_to_string(&p).unwrap();
    let with = |host: &str| {
        std::fs::write(&p, text.replace("[[hosts]]\nkind = \"qemu\"\n", host)).unwrap();
        HuntConfig::load(&p)
    };
    let c = with("[[hosts]]\nname = \"lab1\"\nkind = \"ssh\"\naddress = \"root@lab1:2222\"\nidentity_file = \"id\"\npower_cycle = \"ipmitool power cycle\"\n").unwrap();
    let HostKind::Ssh(s) = &c.hosts[0].kind else {
        panic!("not ssh")
    };
    assert_eq!(
        (
            s.target.user.as_str(),
            s.target.host.as_str(),
            s.target.port
        ),
        ("root", "lab1", 2222)
    );
    assert_eq!(s.install, Install::Kexec { cmdline: None });
    assert_eq!(
        s.agent_url,
        format!("http://lab1:{}", firstbad_wire::GUEST_AGENT_PORT)
    );
    for (host, field, words) in [
        ("kind = \"ssh\"\naddress = \"lab1\"\n", "hosts[0].address", "user@host"),
        ("kind = \"ssh\"\naddress = \"r@h\"\ninstall = \"pxe\"\n", "hosts[0].install", "grub-reboot"),
        ("kind = \"ssh\"\naddress = \"r@h\"\ninstall = \"grub-reboot\"\n", "hosts[0].grub_entry", "menu entry"),
        ("kind = \"ssh\"\naddress = \"r@h\"\ninstall = \"commands\"\n", "hosts[0].install_commands", "{image}"),
        ("kind = \"ssh\"\naddress = \"r@h\"\nmemory_mb = 512\n", "hosts[0].memory_mb", "not read"),
        ("kind = \"qemu\"\naddress = \"r@h\"\n", "hosts[0].address", "not read"),
        ("kind = \"ssh\"\naddress = \"r@h\"\ninsecure_ignore_host_key = true\nknown_hosts = \"k\"\n", "hosts[0].insecure_ignore_host_key", "keep one"),
    ] {
        let e = with(&format!("[[hosts]]\n{host}")).unwrap_err().to_string();
        assert!(e.contains("hunt.toml") && e.contains(field) && e.contains(words), "{e}");
    }
    let e = with("[[hosts]]\nname = \"a\"\nkind = \"qemu\"\n[[hosts]]\nname = \"a\"\nkind = \"ssh\"\naddress = \"r@h\"\n").unwrap_err().to_string();
    assert!(e.contains("hosts[1].name"), "{e}");
}

/// Issue 33: a qemu host's scratch disk from a preset with fields over it; today's disk when
/// none is named; errors name the field and the fix.
#[test]
fn a_qemu_disk_preset_with_fields_over_it_and_its_errors() {
    let dir = tempfile::tempdir().unwrap();
    let disk = |extra: &str| {
        let p = fixture(dir.path(), extra);
        HuntConfig::load(&p).map(|c| match &c.hosts[0].kind {
            HostKind::Qemu(q) => q.disk.clone(),
            _ => panic!("not qemu"),
        })
    };
    assert!(disk("").unwrap().is_page_cache());
    let d =
        disk("disk = \"sata-2009\"\ndisk_queue_size = 64\ndisk_cache = \"writeback\"\n").unwrap();
    assert_eq!(
        d.describe(),
        "sata-2009: cache=writeback, 90 MB/s, 120 IOPS, 1 queue(s) of 64"
    );
    for (extra, field, words) in [
        (
            "disk = \"sata\"\n",
            "hosts[0].disk",
            "\"sata-2009\", \"nvme-2019\"",
        ),
        (
            "disk_cache = \"directsync\"\n",
            "hosts[0].disk_cache",
            "\"none\"",
        ),
        (
            "disk_queue_size = 48\n",
            "hosts[0].disk_queue_size",
            "power of two",
        ),
        (
            "disk_queue_size = 4096\n",
            "hosts[0].disk_queue_size",
            "0..=1024",
        ),
        ("disk_mb_s = -1\n", "hosts[0].disk_mb_s", "out of range"),
    ] {
        let e = disk(extra).unwrap_err().to_string();
        assert!(
            e.contains("hunt.toml") && e.contains(field) && e.contains(words),
            "{e}"
        );
    }
    let p = fixture(dir.path(), "");
    let text = std::fs::read_to_string(&p).unwrap().replace(
        "kind = \"qemu\"\n",
        "kind = \"ssh\"\naddress = \"r@h\"\ndisk = \"sata-2009\"\n",
    );
    std::fs::write(&p, text).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("hosts[0].disk") && e.contains("not read"), "{e}");
}

#[test]
fn a_lava_host_validates_and_its_token_never_comes_from_the_hunt_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let text = std::fs::read_to_string(&p).unwrap();
    let with = |host: &str| {
        std::fs::write(&p, text.replace("[[hosts]]\nkind = \"qemu\"\n", host)).unwrap();
        HuntConfig::load(&p)
    };
    let c = with("[[hosts]]\nname = \"farm\"\nkind = \"lava\"\nserver = \"https://lava.lab/\"\ntoken_env = \"LAVA_TOKEN\"\ndevice_type = \"qemu\"\ntags = [\"qemu-01\"]\njobs = 8\n").unwrap();
    let HostKind::Lava(l) = &c.hosts[0].kind else {
        panic!("not lava")
    };
    assert_eq!(l.server, "https://lava.lab");
    assert_eq!(l.token, crate::config::LavaToken::Env("LAVA_TOKEN".into()));
    assert_eq!((l.jobs, l.job_timeout_s, l.scratch_mb), (8, 1800, 256));
    assert_eq!(l.tags, ["qemu-01"]);
    let base = "kind = \"lava\"\nserver = \"https://l\"\ndevice_type = \"qemu\"\n";
    for (host, field, words) in [
        (
            format!("{base}token = \"s3cret\"\n"),
            "hosts[0].token",
            "a secret does not go in a hunt file",
        ),
        (base.to_owned(), "hosts[0].token_file", "LAVA API token"),
        (
            format!("{base}token_file = \"t\"\ntoken_env = \"T\"\n"),
            "hosts[0].token_env",
            "keep one",
        ),
        (
            "kind = \"lava\"\ntoken_env = \"T\"\ndevice_type = \"qemu\"\n".to_owned(),
            "hosts[0].server",
            "URL",
        ),
        (
            "kind = \"lava\"\nserver = \"lava.lab\"\ntoken_env = \"T\"\ndevice_type = \"qemu\"\n"
                .to_owned(),
            "hosts[0].server",
            "http://",
        ),
        (
            format!("{base}token_env = \"T\"\njobs = 0\n"),
            "hosts[0].jobs",
            "1",
        ),
        (
            format!("{base}token_env = \"T\"\naddress = \"r@h\"\n"),
            "hosts[0].address",
            "not read",
        ),
        (
            format!("{base}token_env = \"T\"\nboot_timeout_s = 9\n"),
            "hosts[0].boot_timeout_s",
            "not read",
        ),
        (
            format!("{base}token_env = \"T\"\ntags = [\"a b\"]\n"),
            "hosts[0].tags",
            "tag",
        ),
        (
            "kind = \"qemu\"\ndevice_type = \"qemu\"\n".to_owned(),
            "hosts[0].device_type",
            "not read",
        ),
    ] {
        let e = with(&format!("[[hosts]]\n{host}")).unwrap_err().to_string();
        assert!(e.contains(field) && e.contains(words), "{host}: {e}");
    }
}

#[test]
fn env_and_home_expand() {
    std::env::set_var("FIRSTBAD_TEST_EXPAND", "/x");
    assert_eq!(expand("${FIRSTBAD_TEST_EXPAND}/y").unwrap(), "/x/y");
    assert_eq!(expand("${FIRSTBAD_NOPE_NOPE:-/d}/y").unwrap(), "/d/y");
    assert!(expand("${FIRSTBAD_NOPE_NOPE}")
        .unwrap_err()
        .contains("not set"));
}

const LOCAL: &str = "[hunt]\nname = \"l\"\nrepo = \"r\"\ngood = \"v1\"\nbad = \"v2\"\n\n[test]\ncommand = \"make -s check\"\n";

/// The error of loading `text` as `hunt.toml` in `dir`, checked to be one short line that
/// names the file.
fn one_line_error(dir: &Path, text: impl AsRef<[u8]>) -> String {
    let p = dir.join("hunt.toml");
    std::fs::write(&p, text).unwrap();
    let e = HuntFile::load(&p).unwrap_err().to_string();
    assert!(
        e.starts_with(&p.display().to_string()) && !e.contains('\n') && e.len() < 300,
        "{} bytes: {}",
        e.len(),
        e.chars().take(400).collect::<String>()
    );
    e
}

// issue 19, finding 7: `timeout_s = 9223372036854775807` was accepted, and adding it to an
// Instant panicked ("overflow when adding duration to instant"), again on every resume.
#[test]
fn a_test_timeout_of_i64_max_is_refused_with_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let e = one_line_error(
        dir.path(),
        format!("{LOCAL}timeout_s = 9223372036854775807\n"),
    );
    assert!(
        e.contains("hunt.toml: test.timeout_s: 9223372036854775807 is out of range 1..=604800"),
        "{e}"
    );
}

// issue 19, finding 7: `build.jobs = 4294967295` was accepted (make -j4294967295).
#[test]
fn four_billion_build_jobs_are_refused_with_their_range() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "");
    let text = std::fs::read_to_string(&p).unwrap().replace(
        "config = \"kernel.config\"\n",
        "config = \"kernel.config\"\njobs = 4294967295\n",
    );
    let e = one_line_error(dir.path(), text);
    assert!(
        e.contains("build.jobs: 4294967295 is out of range 1..=4096"),
        "{e}"
    );
}

// issue 19, finding 7: `boot_timeout_s = 0` and `workload.timeout_s = 0` were accepted: every
// boot, or every run, failed at once and the whole range came out skipped.
#[test]
fn zero_boot_and_workload_timeouts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "boot_timeout_s = 0\n");
    let original = std::fs::read_to_string(&p).unwrap();
    let e = one_line_error(dir.path(), &original);
    assert!(
        e.contains("hosts[0].boot_timeout_s: 0 is out of range 1..=3600"),
        "{e}"
    );
    let text = original.replace("boot_timeout_s = 0\n", "") + "timeout_s = 0\n";
    let e = one_line_error(dir.path(), &text);
    assert!(
        e.contains("workload.timeout_s: 0 is out of range 1..=86400"),
        "{e}"
    );
    let ssh = "[[hosts]]\nkind = \"ssh\"\naddress = \"r@h\"\nboot_timeout_s = 0\n";
    let text = original.replace("[[hosts]]\nkind = \"qemu\"\nboot_timeout_s = 0\n", ssh);
    let e = one_line_error(dir.path(), &text);
    assert!(
        e.contains("hosts[0].boot_timeout_s: 0 is out of range 1..=7200"),
        "{e}"
    );
}

// issue 19, finding 7: 4294967295 was accepted for max_failed_boots, refine_boots and
// confirm_pairs (a hunt that would boot one commit four billion times).
#[test]
fn four_billion_boots_pairs_or_failures_are_refused_with_their_range() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture(dir.path(), "")).unwrap();
    for (field, range) in [
        ("max_failed_boots", "1..=100"),
        ("refine_boots", "0..=1000"),
        ("confirm_pairs", "0..=100"),
    ] {
        let e = one_line_error(
            dir.path(),
            format!("{text}\n[classify]\n{field} = 4294967295\n"),
        );
        assert!(
            e.contains(&format!(
                "hunt.toml: classify.{field}: 4294967295 is out of range {range}"
            )),
            "{e}"
        );
    }
}

// issue 19, finding 7: a NUL in test.command (TOML's "\u0000") passed validation and the
// spawn failed mid-hunt with exit code 5 (infrastructure); it is bad input (exit code 2).
#[test]
fn a_nul_in_the_test_command_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let text = LOCAL.replace("make -s check", "make\\u0000check");
    let p = write(dir.path(), "hunt.toml", &text);
    let e = HuntFile::load(&p).unwrap_err();
    assert!(
        matches!(&e, crate::error::ConfigError::Field { field, .. } if field == "test.command"),
        "{e}"
    );
    assert!(e.to_string().contains("NUL"), "{e}");
    // The same anywhere a string is: a path, a list, a host.
    let text = LOCAL.replace("good = \"v1\"", "good = [\"v0\", \"v\\u0000\"]");
    let e = one_line_error(dir.path(), &text);
    assert!(e.contains("hunt.good[1]: holds a NUL byte"), "{e}");
}

// issue 19, finding 7: a NUL or non-UTF-8 byte in the file itself is bad input, named by
// line and column in one line.
#[test]
fn a_nul_or_non_utf8_byte_in_the_file_is_located_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = LOCAL.as_bytes().to_vec();
    bytes.splice(7..7, [0u8]);
    let e = one_line_error(dir.path(), &bytes);
    assert!(e.contains("line 2, column 1: a NUL byte"), "{e}");
    let mut bytes = LOCAL.as_bytes().to_vec();
    bytes.splice(17..17, [0xffu8, 0xfe]);
    let e = one_line_error(dir.path(), &bytes);
    assert!(
        e.contains("line 2, column 11: byte 0xff is not UTF-8"),
        "{e}"
    );
    // Text handed to parse directly is held to the same.
    let e = HuntFile::parse(
        Path::new("x/hunt.toml"),
        &LOCAL.replace("[test]", "[te\0st]"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("x/hunt.toml: line 7, column 4: a NUL byte"),
        "{e}"
    );
}

// issue 19, finding 7: a 10 MB one-line garbage file wrote 20 MB to stderr (TOML's error
// quotes the line, twice). Over 1 MiB is refused unread; under it the quote is capped.
#[test]
fn a_huge_or_binary_hunt_file_gets_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = one_line_error(dir.path(), "x".repeat(10 << 20));
    assert!(e.contains("larger than 1024 KiB"), "{e}");
    let e = one_line_error(dir.path(), "= garbage ".repeat(90_000));
    assert!(e.contains("line 1, column 1"), "{e}");
    let e = one_line_error(
        dir.path(),
        format!("{LOCAL}jobs = \"{}\"\n", "9".repeat(500_000)),
    );
    assert!(e.contains("line 9") && e.contains("jobs"), "{e}");
    // An ELF header: binary, whatever the extension says.
    let e = one_line_error(dir.path(), b"\x7fELF\x02\x01\x01\x00\x00\x00");
    assert!(e.contains("binary"), "{e}");
}

// issue 19, finding 7: a state_dir that is a file failed at the journal with a message that
// named neither the file nor the field.
#[test]
fn a_state_dir_that_is_a_file_names_the_path_the_field_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "state", "not a directory\n");
    let file = std::fs::canonicalize(file).unwrap();
    let text = LOCAL.replace("bad = \"v2\"\n", "bad = \"v2\"\nstate_dir = \"state\"\n");
    let e = one_line_error(dir.path(), &text);
    assert!(
        e.contains("hunt.toml: hunt.state_dir: ")
            && e.contains(&format!("{}", file.display()))
            && e.contains("is not a directory")
            && e.contains("set hunt.state_dir to a directory"),
        "{e}"
    );
    let e = one_line_error(dir.path(), text.replace("\"state\"", "\"state/sub\""));
    assert!(
        e.contains("hunt.state_dir") && e.contains("cannot be made"),
        "{e}"
    );
    // The build cache is held to the same.
    let kernel = std::fs::read_to_string(fixture(dir.path(), ""))
        .unwrap()
        .replace(
            "config = \"kernel.config\"\n",
            "config = \"kernel.config\"\ncache_dir = \"state\"\n",
        );
    let e = one_line_error(dir.path(), kernel);
    assert!(
        e.contains("hunt.toml: build.cache_dir: ") && e.contains("is not a directory"),
        "{e}"
    );
}

#[test]
fn a_number_of_the_wrong_type_names_the_line_and_says_number() {
    let dir = tempfile::tempdir().unwrap();
    let e = one_line_error(dir.path(), format!("{LOCAL}jobs = \"lots\"\n"));
    assert!(
        e.contains("line 9, column 8: invalid type: string \"lots\", expected an integer: in `jobs = \"lots\"`"),
        "{e}"
    );
}

/// A hunt file in `dir` whose number field `b` (as `bounds.rs` names it) holds `value`.
fn with_number(dir: &Path, b: &super::bounds::Bound, value: &str) -> PathBuf {
    let (table, key) = b.field.split_once('.').unwrap();
    let line = match key.strip_prefix("distcc[]") {
        // A part of a `host:port/slots` entry.
        Some(part) => format!("distcc = [\"build1{}{value}\"]\n", &part[..1]),
        None => format!("{key} = {value}\n"),
    };
    let kernel = |extra: &str| {
        let p = fixture(dir, extra);
        std::fs::read_to_string(p).unwrap()
    };
    let text = match (table, b.kind) {
        // What only a metric hunt reads is placed in one.
        ("test", _) if key == "build_timeout_s" || key == "build" => {
            format!("{LOCAL}metric = \"ms\"\n{line}")
        }
        // A command: LOCAL's is replaced.
        ("test", _) if key == "command" => LOCAL.replace("command = \"make -s check\"\n", &line),
        ("test", _) => format!("{LOCAL}{line}"),
        ("build", _) => kernel("").replace(
            "config = \"kernel.config\"\n",
            &format!("config = \"kernel.config\"\n{line}"),
        ),
        ("hosts[]", Some("qemu")) => kernel(&line),
        ("hosts[]", Some("ssh")) => kernel("").replace(
            "kind = \"qemu\"\n",
            &format!("kind = \"ssh\"\naddress = \"r@h\"\n{line}"),
        ),
        ("hosts[]", Some("lava")) => kernel("").replace(
            "kind = \"qemu\"\n",
            &format!("kind = \"lava\"\nserver = \"https://l\"\ntoken_env = \"T\"\ndevice_type = \"qemu\"\n{line}"),
        ),
        ("workload", _) => kernel("") + &line,
        ("classify", _) => {
            let mode = match key {
                "relative" => "mode = \"relative\"\n",
                "threshold" => "mode = \"absolute\"\n",
                // At its largest, min_boots needs a max_boots as large.
                "min_boots" => "max_boots = 1000\n",
                _ => "",
            };
            kernel("") + "\n[classify]\n" + mode + &line
        }
        other => panic!("no hunt file places {other:?}"),
    };
    write(dir, "hunt.toml", &text)
}

// issue 19, finding 7: every number in the table is checked, at both ends, under the name
// and with the range the table gives.
#[test]
fn every_bound_in_the_table_is_enforced_at_both_ends() {
    use super::bounds::{Range, BOUNDS};
    let dir = tempfile::tempdir().unwrap();
    for b in BOUNDS {
        let (inside, outside): (Vec<String>, Vec<String>) = match b.range {
            Range::Int { min, max } => (
                vec![min.to_string(), max.to_string()],
                vec![(min - 1).to_string(), (max + 1).to_string()],
            ),
            // A command of `min` and of `max` bytes; one byte more. (Fewer than 1 is the empty
            // command, refused as empty.)
            Range::Bytes { min, max } => (
                vec![
                    format!("{:?}", "x".repeat(min as usize)),
                    format!("{:?}", "x".repeat(max as usize)),
                ],
                vec![format!("{:?}", "x".repeat(max as usize + 1))],
            ),
            Range::Float {
                min,
                min_open,
                max,
                max_open,
            } => {
                let step = |x: f64| (x.abs() * 0.1).max(0.1);
                let (mut inside, mut outside) = (vec![], vec![]);
                for (end, open, away) in [(min, min_open, -step(min)), (max, max_open, step(max))] {
                    if open {
                        outside.push(end);
                        inside.push(end - away / 100.0);
                    } else {
                        inside.push(end);
                        outside.push(end + away);
                    }
                }
                outside.extend([f64::NAN, f64::INFINITY]);
                let toml = |x: f64| match x {
                    x if x.is_nan() => "nan".to_owned(),
                    x if x.is_infinite() => "inf".to_owned(),
                    x => format!("{x:?}"),
                };
                (
                    inside.into_iter().map(toml).collect(),
                    outside.into_iter().map(toml).collect(),
                )
            }
        };
        let field = match b.field.split_once("[]") {
            // `build.distcc[]:port`, `build.distcc[]/slots`: errors name the entry.
            Some(("build.distcc", _)) => "build.distcc[0]".to_owned(),
            _ => b.field.replace("hosts[]", "hosts[0]"),
        };
        for x in &inside {
            let p = with_number(dir.path(), b, x);
            if let Err(e) = HuntFile::load(&p) {
                let x = crate::report::text::cut(x, 40);
                panic!("{field} = {x} is inside {}: {e}", b.range);
            }
        }
        for x in &outside {
            let p = with_number(dir.path(), b, x);
            let e = HuntFile::load(&p).unwrap_err().to_string();
            let said = match b.range {
                Range::Bytes { .. } => format!(" bytes long, out of range {}: {}", b.range, b.why),
                _ => format!(" is out of range {}: {}", b.range, b.why),
            };
            assert!(
                e.contains(&format!("hunt.toml: {field}: ")) && e.contains(&said),
                "{field} = {}: {e}",
                crate::report::text::cut(x, 40)
            );
        }
    }
}

#[test]
fn a_hunt_name_of_dots_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for name in [".", ".."] {
        let e = one_line_error(
            dir.path(),
            LOCAL.replace("name = \"l\"", &format!("name = \"{name}\"")),
        );
        assert!(e.contains("hunt.name"), "{e}");
    }
}

// The example hunt files are what a newcomer copies: each must load as it is shipped (with
// FIRSTBAD_REPO unset, `.` is this repository).
#[test]
fn every_example_hunt_file_in_configs_loads() {
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    for name in ["demo.toml", "command.toml", "metric.toml", "prebuilt.toml"] {
        let p = configs.join(name);
        match HuntFile::load(&p) {
            Ok(HuntFile::Local(c)) if name == "metric.toml" => {
                let m = c.test.measure.expect("metric.toml is a metric hunt");
                assert_eq!(m.metric.format.name(), "auto");
                assert_eq!(m.classify.confidence, 0.99);
                assert_eq!(m.classify.drift_check_every, 2);
            }
            Ok(_) => {}
            // The demo's repository is made by scripts/demo; everything before it must hold.
            Err(e) if name == "demo.toml" && e.to_string().contains("hunt.repo") => {}
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

/// A prebuilt hunt file with `hunt` lines, `build` lines and `hosts` lines.
fn prebuilt_fixture(dir: &Path, hunt: &str, build: &str, host: &str) -> PathBuf {
    write(
        dir,
        "fsync.toml",
        "kind = \"fsync-latency\"\nwriters = 1\nwriter_bytes = 1048576\nwriter_block_bytes = 65536\nappend_bytes = 4096\nfsyncs = 10\ninterval_ms = 0\n",
    );
    write(
        dir,
        "hunt.toml",
        &format!(
            "[hunt]\nname = \"p\"\n{hunt}\n[build]\nkind = \"prebuilt\"\n{build}\n\n[[hosts]]\n{host}\n[workload]\nfile = \"fsync.toml\"\nmetric = \"fsync_latency_p50_ms\"\n"
        ),
    )
}

const TWO: &str = "kernels = [\"linux-image-6.1.0-47-cloud-amd64\", \"linux-image-6.1.0-57-cloud-amd64=6.1.192-3\"]";

#[test]
fn a_prebuilt_list_needs_no_repository_and_keeps_its_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("k/lib/modules")).unwrap();
    let build = "kernels = [\"linux-image-6.1.0-47-cloud-amd64\", \"./k\", \"linux-image-6.12.117+deb12-cloud-amd64=6.12.117-1~deb12u1\"]";
    let p = prebuilt_fixture(dir.path(), "", build, "kind = \"qemu\"");
    let c = HuntConfig::load(&p).unwrap();
    let Build::Prebuilt(b) = &c.build else {
        panic!("not a prebuilt hunt")
    };
    let sources: Vec<&KernelSource> = b.kernels.iter().map(|k| &k.source).collect();
    assert!(
        matches!(sources[0], KernelSource::Package { name, version: None } if name == "linux-image-6.1.0-47-cloud-amd64")
    );
    assert!(matches!(sources[1], KernelSource::Dir(d) if d.ends_with("k")));
    assert!(
        matches!(sources[2], KernelSource::Package { version: Some(v), .. } if v == "6.12.117-1~deb12u1")
    );
    assert_eq!((b.good.as_deref(), b.bad.as_deref()), (None, None));
}

#[test]
fn prebuilt_mistakes_name_the_field_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("kdir")).unwrap();
    let qemu = "kind = \"qemu\"";
    let cases = [
        ("repo = \"linux\"", TWO, qemu, "hunt.repo: is for hunts over git commits"),
        ("good = \"linux-image-9\"", TWO, qemu, "hunt.good: \"linux-image-9\" is not an entry of build.kernels"),
        (
            "good = \"linux-image-6.1.0-57-cloud-amd64=6.1.192-3\"\nbad = \"linux-image-6.1.0-47-cloud-amd64\"",
            TWO,
            qemu,
            "hunt.bad: is not after hunt.good",
        ),
        ("", "kernels = [\"linux-image-6.1.0-47-cloud-amd64\"]", qemu, "build.kernels: needs at least two kernels"),
        ("", &format!("{TWO}\nconfig = \"x.config\""), qemu, "build.config: is for kind = \"source\""),
        ("", "kernels = [\"Linux Image\", \"b\"]", qemu, "build.kernels[0]: \"Linux Image\" is not a Debian package name"),
        ("", "kernels = [\"./nope.deb\", \"b1\"]", qemu, "is neither a directory"),
        ("", "kernels = [\"kdir\", \"b1\"]", qemu, "build.kernels[0]: \"kdir\" is read as a Debian package name, and a directory of that name is beside the hunt file: write \"./kdir\""),
        (
            "",
            TWO,
            "kind = \"ssh\"\naddress = \"root@lab1\"",
            "hosts[0].kind: prebuilt kernels on ssh hosts: not yet; use kind = \"qemu\"",
        ),
    ];
    for (hunt, build, host, want) in cases {
        let p = prebuilt_fixture(dir.path(), hunt, build, host);
        let e = HuntConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains(want), "want {want:?} in: {e}");
    }
}

#[test]
fn a_git_hunt_without_a_repository_points_at_prebuilt() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kernel.config", "CONFIG_64BIT=y\n");
    let p = prebuilt_fixture(
        dir.path(),
        "good = \"v1\"\nbad = \"v2\"",
        "",
        "kind = \"qemu\"",
    );
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("kind = \"prebuilt\"", "config = \"kernel.config\"");
    std::fs::write(&p, text).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("hunt.repo: missing") && e.contains("prebuilt"),
        "{e}"
    );
}

/// Issue 22 item 3: `[chain]` maps prebuilt kernels to revisions and builds the source stage.
#[test]
fn a_chain_maps_kernels_to_revisions_and_builds_like_a_source_hunt() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kernel.config", "CONFIG_64BIT=y\n");
    std::fs::create_dir_all(dir.path().join("linux")).unwrap();
    let chain = |extra: &str| {
        format!("{TWO}\n\n[chain]\nrepo = \"linux\"\nconfig = \"kernel.config\"\n{extra}")
    };
    let ok = chain(
        "jobs = 3\nrevisions = { \"linux-image-6.1.0-47-cloud-amd64\" = \"v6.1.170\", \
         \"linux-image-6.1.0-57-cloud-amd64=6.1.192-3\" = \"v6.1.192\" }",
    );
    let p = prebuilt_fixture(dir.path(), "", &ok, "kind = \"qemu\"");
    let c = HuntConfig::load(&p).unwrap();
    let chain_cfg = c.build.prebuilt().unwrap().chain.clone().expect("a chain");
    assert!(chain_cfg.repo.ends_with("linux"));
    assert_eq!(chain_cfg.build.jobs, 3);
    assert!(chain_cfg.build.kernel_config.ends_with("kernel.config"));
    assert_eq!(
        chain_cfg.revisions["linux-image-6.1.0-47-cloud-amd64"],
        "v6.1.170"
    );

    let cases = [
        (chain("revisions = { \"linux-image-9\" = \"v1\" }"), "chain.revisions.\"linux-image-9\": is not an entry of build.kernels"),
        (chain("revisions = { \"linux-image-6.1.0-47-cloud-amd64\" = \" \" }"), "is empty: give the kernel's revision"),
        (chain(""), "chain.revisions: missing"),
        (
            format!("{TWO}\n\n[chain]\nrepo = \"linux\"\nrevisions = {{ \"linux-image-6.1.0-47-cloud-amd64\" = \"v1\" }}"),
            "chain.config: missing",
        ),
        (
            format!("{TWO}\n\n[chain]\nconfig = \"kernel.config\""),
            "chain.repo: missing",
        ),
        (chain("jobs = 0\nrevisions = { \"linux-image-6.1.0-47-cloud-amd64\" = \"v1\" }"), "chain.jobs: "),
        (chain("ccache = \"maybe\"\nrevisions = { \"linux-image-6.1.0-47-cloud-amd64\" = \"v1\" }"), "chain.ccache: \"maybe\""),
    ];
    for (build, want) in cases {
        let p = prebuilt_fixture(dir.path(), "", &build, "kind = \"qemu\"");
        let e = HuntConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains(want), "want {want:?} in: {e}");
    }
}

#[test]
fn a_chain_beside_a_source_build_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kernel.config", "CONFIG_64BIT=y\n");
    let p = prebuilt_fixture(
        dir.path(),
        "repo = \".\"\ngood = \"v1\"\nbad = \"v2\"",
        "\n\n[chain]\nrepo = \".\"",
        "kind = \"qemu\"",
    );
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("kind = \"prebuilt\"", "config = \"kernel.config\"");
    std::fs::write(&p, text).unwrap();
    let e = HuntConfig::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("chain: is for [build] kind = \"prebuilt\""),
        "{e}"
    );
}

/// The hunt file of [`fixture`] with `lines` added to its `[build]` table.
fn with_build_lines(dir: &Path, lines: &str) -> String {
    let p = fixture(dir, "");
    std::fs::read_to_string(&p).unwrap().replace(
        "config = \"kernel.config\"\n",
        &format!("config = \"kernel.config\"\n{lines}"),
    )
}

fn source_build(dir: &Path, lines: &str) -> BuildConfig {
    let p = dir.join("hunt.toml");
    std::fs::write(&p, with_build_lines(dir, lines)).unwrap();
    match HuntConfig::load(&p).unwrap().build {
        Build::Source(b) => b,
        Build::Prebuilt(_) => panic!("a source build"),
    }
}

// Issue 23, item 3: `[build] distcc`, each entry host[:port][/slots]; make -j covers the hosts.
#[test]
fn distcc_hosts_take_default_ports_and_slots_and_size_make_j() {
    let dir = tempfile::tempdir().unwrap();
    let b = source_build(
        dir.path(),
        "distcc = [\"build1\", \"10.0.0.2:3700\", \"[fd00::3]:3632/16\", \"build4/8\"]\n",
    );
    let specs: Vec<String> = b.distcc.iter().map(DistccHost::spec).collect();
    assert_eq!(
        specs,
        [
            "build1:3632/4",
            "10.0.0.2:3700/4",
            "[fd00::3]:3632/16",
            "build4:3632/8"
        ]
    );
    let cpus = std::thread::available_parallelism().unwrap().get() as u32;
    assert_eq!(b.jobs, cpus + 4 + 4 + 16 + 8, "local CPUs plus every slot");
    // An explicit jobs wins; an empty list is off, with -j the CPUs.
    let b = source_build(dir.path(), "distcc = [\"build1/8\"]\njobs = 3\n");
    assert_eq!((b.jobs, b.distcc.len()), (3, 1));
    let b = source_build(dir.path(), "distcc = []\n");
    assert_eq!((b.jobs, b.distcc.len()), (cpus, 0));
}

#[test]
fn bad_distcc_hosts_are_refused_with_the_entry_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    for (entry, wanted) in [
        (
            "build1:0",
            "build.distcc[1]: \"build1:0\": the port 0 is out of range 1..=65535",
        ),
        ("build1:99999", "the port 99999 is out of range 1..=65535"),
        (
            "build1:ssh",
            "has a port that is not a number: write host or host:port",
        ),
        ("build1/0", "the slots 0 is out of range 1..=1024"),
        ("build1/many", "has slots that are not a number"),
        ("", "has no host"),
        (":3632", "has no host"),
        ("fd00::1", "an IPv6 address goes in brackets"),
        ("[fd00::1", "opens [ without closing it"),
        ("me@build1", "is distcc's ssh form (user@host)"),
        ("build1,lzo", "has distcc options"),
        ("build 1", "has ' ' in the host name"),
        ("ok:3632", "build.distcc[1]: \"ok:3632/4\" is listed twice"),
    ] {
        let text = with_build_lines(dir.path(), &format!("distcc = [\"ok\", \"{entry}\"]\n"));
        let e = one_line_error(dir.path(), text);
        assert!(e.contains("hunt.toml: build.distcc[1]: "), "{entry}: {e}");
        assert!(e.contains(wanted), "{entry}: {e}");
    }
    let text = with_build_lines(
        dir.path(),
        "distcc = [\"build1\"]\nmake_args = [\"CC=clang\"]\n",
    );
    let e = one_line_error(dir.path(), text);
    assert!(
        e.contains("build.make_args: \"CC=clang\" sets the compiler, and build.distcc puts distcc in front of gcc itself"),
        "{e}"
    );
    // A single string instead of a list.
    let p = dir.path().join("hunt.toml");
    std::fs::write(&p, with_build_lines(dir.path(), "distcc = \"build1\"\n")).unwrap();
    let e = HuntFile::load(&p).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("distcc") && e.contains("sequence"), "{e}");
}

/// Issue 61, finding 6: a series remote `ext::…` or `fd::17` (git's transports that run a
/// command or read a descriptor) and a `file://` URL of no repository ended every cycle with
/// exit 5, "rerun to resume", and `watch --every` retried them for ever. The first two are
/// refused when the file is read, the third before the fetch; each names `series.remote`.
#[test]
fn series_remotes_that_run_commands_or_name_no_repository_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), "");
    let series = |remote: &str| {
        let path = write(
            dir.path(),
            "series.toml",
            &format!(
                "[series]\nname = \"s\"\nremote = {remote:?}\nrepo = \"linux\"\n\n[build]\nconfig = \
                 \"kernel.config\"\n\n[[hosts]]\nkind = \"qemu\"\n\n[workload]\nfile = \
                 \"fsync.toml\"\nmetric = \"fsync_latency_p50_ms\"\n"
            ),
        );
        SeriesConfig::load(&path)
    };
    for remote in [
        "ext::sh -c touch% /tmp/firstbad-pwned",
        "EXT::sh -c true",
        "fd::17",
        "fd::0,1",
    ] {
        let e = series(remote).expect_err(remote).to_string();
        assert!(
            e.contains("series.toml: series.remote: ") && e.contains("runs"),
            "{remote}: {e}"
        );
    }
    let e = series("file:///nonexistent/linux.git")
        .unwrap()
        .check_remote()
        .expect_err("a file URL of nothing")
        .to_string();
    assert!(
        e.contains("series.remote") && e.contains("/nonexistent/linux.git does not exist"),
        "{e}"
    );
    let here = format!("file://{}", dir.path().display());
    series(&here)
        .unwrap()
        .check_remote()
        .expect("a file URL of a directory");
    series("https://git.example.org/linux.git")
        .unwrap()
        .check_remote()
        .expect("an https URL");
}
